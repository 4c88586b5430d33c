#!/usr/bin/env python3
"""Star Schema Benchmark data derived from TPC-H data, as the SSB
specification derives it (O'Neil et al.): LINEORDER is LINEITEM joined with
ORDERS (and PARTSUPP for the supply cost), CUSTOMER and SUPPLIER get city /
nation / region names instead of keys, PART gets the MFGR#m / MFGR#mc /
MFGR#mcb hierarchy, and DATES covers 1992-01-01 .. 1998-12-31.

    benches/ssb/generate.py <tpch .tbl dir> <ssb output dir>

Writes '|'-separated .tbl files with a trailing '|' (like dbgen), with DuckDB.
"""
import os
import sys

import duckdb

TPCH = {
    "region": "r_regionkey INT, r_name VARCHAR, r_comment VARCHAR",
    "nation": "n_nationkey INT, n_name VARCHAR, n_regionkey INT, n_comment VARCHAR",
    "supplier": "s_suppkey INT, s_name VARCHAR, s_address VARCHAR, s_nationkey INT, s_phone VARCHAR, "
                "s_acctbal DECIMAL(15,2), s_comment VARCHAR",
    "customer": "c_custkey INT, c_name VARCHAR, c_address VARCHAR, c_nationkey INT, c_phone VARCHAR, "
                "c_acctbal DECIMAL(15,2), c_mktsegment VARCHAR, c_comment VARCHAR",
    "part": "p_partkey INT, p_name VARCHAR, p_mfgr VARCHAR, p_brand VARCHAR, p_type VARCHAR, p_size INT, "
            "p_container VARCHAR, p_retailprice DECIMAL(15,2), p_comment VARCHAR",
    "partsupp": "ps_partkey INT, ps_suppkey INT, ps_availqty INT, ps_supplycost DECIMAL(15,2), ps_comment VARCHAR",
    "orders": "o_orderkey BIGINT, o_custkey INT, o_orderstatus VARCHAR, o_totalprice DECIMAL(15,2), "
              "o_orderdate DATE, o_orderpriority VARCHAR, o_clerk VARCHAR, o_shippriority INT, o_comment VARCHAR",
    "lineitem": "l_orderkey BIGINT, l_partkey INT, l_suppkey INT, l_linenumber INT, l_quantity DECIMAL(15,2), "
                "l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), l_tax DECIMAL(15,2), "
                "l_returnflag VARCHAR, l_linestatus VARCHAR, l_shipdate DATE, l_commitdate DATE, "
                "l_receiptdate DATE, l_shipinstruct VARCHAR, l_shipmode VARCHAR, l_comment VARCHAR",
}

SSB = {
    "dates": """
        select cast(strftime(d, '%Y%m%d') as int), strftime(d, '%B %-d, %Y'), strftime(d, '%A'),
          strftime(d, '%B'), year(d), year(d) * 100 + month(d), strftime(d, '%b%Y'),
          isodow(d) % 7 + 1, day(d), dayofyear(d), month(d), cast(strftime(d, '%U') as int) + 1,
          case when month(d) = 12 then 'Christmas' when month(d) in (6, 7, 8) then 'Summer'
               when month(d) in (3, 4, 5) then 'Spring' when month(d) in (9, 10, 11) then 'Fall'
               else 'Winter' end,
          case when isodow(d) = 6 then 1 else 0 end,
          case when d = last_day(d) then 1 else 0 end,
          case when (month(d) = 12 and day(d) = 25) or (month(d) = 1 and day(d) = 1) then 1 else 0 end,
          case when isodow(d) <= 5 then 1 else 0 end
        from (select unnest(generate_series(date '1992-01-01', date '1998-12-31', interval 1 day))::date as d)
        order by d""",
    "customer": """
        select c_custkey, c_name, c_address, rpad(substr(n_name, 1, 9), 9, ' ') || (c_custkey % 10),
          n_name, r_name, c_phone, c_mktsegment
        from customer join nation on c_nationkey = n_nationkey join region on n_regionkey = r_regionkey
        order by c_custkey""",
    "supplier": """
        select s_suppkey, s_name, s_address, rpad(substr(n_name, 1, 9), 9, ' ') || (s_suppkey % 10),
          n_name, r_name, s_phone
        from supplier join nation on s_nationkey = n_nationkey join region on n_regionkey = r_regionkey
        order by s_suppkey""",
    "part": """
        select p_partkey, p_name, 'MFGR#' || m, 'MFGR#' || m || c, 'MFGR#' || m || c || (p_partkey % 40 + 1),
          split_part(p_name, ' ', 1), p_type, p_size, p_container
        from (select *, right(p_mfgr, 1) as m, right(p_brand, 1) as c from part)
        order by p_partkey""",
    "lineorder": """
        select cast(strftime(o_orderdate, '%Y%m%d') as int), l_orderkey, l_linenumber, o_custkey, l_partkey,
          l_suppkey, o_orderpriority, o_shippriority, cast(l_quantity as int), l_extendedprice, o_totalprice,
          cast(l_discount * 100 as int), cast(l_extendedprice * (1 - l_discount) as decimal(15, 2)),
          ps_supplycost, cast(l_tax * 100 as int), cast(strftime(l_commitdate, '%Y%m%d') as int), l_shipmode
        from lineitem join orders on l_orderkey = o_orderkey
          join partsupp on ps_partkey = l_partkey and ps_suppkey = l_suppkey""",
}


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    con = duckdb.connect()
    for name, cols in TPCH.items():
        names = [c.split()[0] for c in cols.split(", ")] + ["__end"]
        types = {c.split()[0]: " ".join(c.split()[1:]) for c in cols.split(", ")}
        types["__end"] = "VARCHAR"
        con.execute(f"create view {name} as select * exclude (__end) from read_csv("
                    f"'{os.path.join(src, name + '.tbl')}', delim='|', header=false, quote='', "
                    f"columns={types!r})")
        del names
    for name, query in SSB.items():
        path = os.path.join(out, name + ".tbl")
        # A trailing empty column gives every line dbgen's trailing '|'.
        con.execute(f"copy (select *, '' from ({query})) to '{path}' (delimiter '|', header false, quote '')")
        print(f"{name}: {con.execute(f'select count(*) from ({query})').fetchone()[0]} rows")


if __name__ == "__main__":
    main()
