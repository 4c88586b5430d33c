-- Star Schema Benchmark tables as Doris users create them: the fact table
-- partitioned by year of lo_orderdate (yyyymmdd integers) and sorted by it.
CREATE TABLE IF NOT EXISTS dates (
    d_datekey INT NOT NULL, d_date VARCHAR(20) NOT NULL, d_dayofweek VARCHAR(10) NOT NULL,
    d_month VARCHAR(11) NOT NULL, d_year INT NOT NULL, d_yearmonthnum INT NOT NULL,
    d_yearmonth VARCHAR(9) NOT NULL, d_daynuminweek INT NOT NULL, d_daynuminmonth INT NOT NULL,
    d_daynuminyear INT NOT NULL, d_monthnuminyear INT NOT NULL, d_weeknuminyear INT NOT NULL,
    d_sellingseason VARCHAR(14) NOT NULL, d_lastdayinweekfl INT NOT NULL, d_lastdayinmonthfl INT NOT NULL,
    d_holidayfl INT NOT NULL, d_weekdayfl INT NOT NULL
) DUPLICATE KEY(d_datekey) DISTRIBUTED BY HASH(d_datekey) BUCKETS 1;
CREATE TABLE IF NOT EXISTS customer (
    c_custkey INT NOT NULL, c_name VARCHAR(26) NOT NULL, c_address VARCHAR(41) NOT NULL,
    c_city VARCHAR(11) NOT NULL, c_nation VARCHAR(16) NOT NULL, c_region VARCHAR(13) NOT NULL,
    c_phone VARCHAR(16) NOT NULL, c_mktsegment VARCHAR(11) NOT NULL
) DUPLICATE KEY(c_custkey) DISTRIBUTED BY HASH(c_custkey) BUCKETS 8;
CREATE TABLE IF NOT EXISTS supplier (
    s_suppkey INT NOT NULL, s_name VARCHAR(26) NOT NULL, s_address VARCHAR(41) NOT NULL,
    s_city VARCHAR(11) NOT NULL, s_nation VARCHAR(16) NOT NULL, s_region VARCHAR(13) NOT NULL,
    s_phone VARCHAR(16) NOT NULL
) DUPLICATE KEY(s_suppkey) DISTRIBUTED BY HASH(s_suppkey) BUCKETS 4;
CREATE TABLE IF NOT EXISTS part (
    p_partkey INT NOT NULL, p_name VARCHAR(56) NOT NULL, p_mfgr VARCHAR(7) NOT NULL,
    p_category VARCHAR(8) NOT NULL, p_brand VARCHAR(10) NOT NULL, p_color VARCHAR(12) NOT NULL,
    p_type VARCHAR(26) NOT NULL, p_size INT NOT NULL, p_container VARCHAR(11) NOT NULL
) DUPLICATE KEY(p_partkey) DISTRIBUTED BY HASH(p_partkey) BUCKETS 8;
CREATE TABLE IF NOT EXISTS lineorder (
    lo_orderdate INT NOT NULL, lo_orderkey BIGINT NOT NULL, lo_linenumber INT NOT NULL,
    lo_custkey INT NOT NULL, lo_partkey INT NOT NULL, lo_suppkey INT NOT NULL,
    lo_orderpriority VARCHAR(16) NOT NULL, lo_shippriority INT NOT NULL, lo_quantity INT NOT NULL,
    lo_extendedprice DECIMAL(15,2) NOT NULL, lo_ordtotalprice DECIMAL(15,2) NOT NULL,
    lo_discount INT NOT NULL, lo_revenue DECIMAL(15,2) NOT NULL, lo_supplycost DECIMAL(15,2) NOT NULL,
    lo_tax INT NOT NULL, lo_commitdate INT NOT NULL, lo_shipmode VARCHAR(11) NOT NULL
) DUPLICATE KEY(lo_orderdate, lo_orderkey)
PARTITION BY RANGE(lo_orderdate) (
    PARTITION p1992 VALUES LESS THAN ("19930101"),
    PARTITION p1993 VALUES LESS THAN ("19940101"),
    PARTITION p1994 VALUES LESS THAN ("19950101"),
    PARTITION p1995 VALUES LESS THAN ("19960101"),
    PARTITION p1996 VALUES LESS THAN ("19970101"),
    PARTITION p1997 VALUES LESS THAN ("19980101"),
    PARTITION p1998 VALUES LESS THAN ("19990101"))
DISTRIBUTED BY HASH(lo_orderkey) BUCKETS 16;
