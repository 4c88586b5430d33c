#!/usr/bin/env bash
# ODBC against a running Tethys: Debian's MariaDB Connector/ODBC
# (odbc-mariadb) through unixODBC's isql, with a DSN of its own, and from
# Python through pyodbc with bound parameters.
# Usage: odbc_probe.sh PORT SQL_FILE. Exits non-zero on the first mismatch.
set -euo pipefail
port="$1"
sql_file="$2"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
driver=/usr/lib/x86_64-linux-gnu/odbc/libmaodbc.so
cat > "$dir/odbcinst.ini" <<INI
[MariaDB]
Driver=$driver
INI
cat > "$dir/odbc.ini" <<INI
[tethys]
Driver=MariaDB
Server=127.0.0.1
Port=$port
User=root
Password=
INI
export ODBCSYSINI="$dir" ODBCINI="$dir/odbc.ini"
fail() { echo "odbc probe: $*" >&2; exit 1; }
# isql -b reads one statement per line.
run() { isql -b -v -d'|' tethys root "" 2>&1 <<< "$1"; }

out="$(run "CREATE DATABASE odbc_db")" || fail "create database: $out"
# The table and its rows, one statement per line, in the new database.
{
  echo "USE odbc_db"
  tr '\n' ' ' < "$sql_file" | sed 's/; */;\n/g'
} > "$dir/load.sql"
out="$(isql -b -v tethys root "" < "$dir/load.sql" 2>&1)" || fail "load: $out"
grep -q '\[ISQL\]ERROR\|\[MariaDB\]' <<< "$out" && fail "load: $out"

# Every type back as text.
out="$(run "SELECT k, b, ti, si, i, bi, li, f, d, amount, dt, ts, ts3, c, v, s FROM odbc_db.all_types WHERE k = 1")"
want="1|1|-5|300|70000|9000000000|12345678901234567890123456789012345678|1.5|2.25|12345.678|2026-08-01|2026-08-01 10:20:30|2026-08-01 10:20:30.123|ab|héllo 'q'|long text"
grep -qF "$want" <<< "$out" || fail "row 1: want $want, got: $out"
out="$(run "SELECT count(*) FROM odbc_db.all_types WHERE v IS NULL")"
grep -qx '1' <<< "$out" || fail "NULL row: $out"

# SQLTables (isql's "help") lists the table; SQLColumns ("help table") its columns with types.
out="$(isql -b -v -d'|' tethys root "" <<< "help" 2>&1)"
grep -q 'odbc_db|.*|all_types|TABLE' <<< "$out" || fail "SQLTables: $out"
out="$(printf 'USE odbc_db\nhelp all_types\n' | isql -b -v -d'|' tethys root "" 2>&1)"
# isql asks as an ODBC 2 application of the Unicode driver: dates are 9
# and 11 (SQL_DATE, SQL_TIMESTAMP), strings the wide types (-9 SQL_WVARCHAR).
for col in 'k|4|INT' 'bi|-5|BIGINT' 'amount|3|DECIMAL' 'dt|9|DATE' 'ts|11|DATETIME' 'v|-9|VARCHAR' 's|-10|TEXT'; do
  name="${col%%|*}"
  rest="${col#*|}"
  grep -q "|all_types|$name|$rest" <<< "$out" || fail "SQLColumns $name (want $rest): $out"
done
n="$(grep -c '|all_types|' <<< "$out")"
[ "$n" = 16 ] || fail "SQLColumns: $n columns, want 16: $out"
# The same driver from an application: pyodbc, with bound parameters
# (SQLPrepare / SQLBindParameter / SQLExecute) and typed values.
python3 - "$port" "$driver" <<'PY' || fail "pyodbc"
import datetime, decimal, sys
import pyodbc
port, driver = sys.argv[1], sys.argv[2]
c = pyodbc.connect(f"DRIVER={{{driver}}};SERVER=127.0.0.1;PORT={port};UID=root;PWD=;DATABASE=odbc_db", autocommit=True)
cur = c.cursor()
cur.execute("SELECT k, bi, amount, dt, ts, v FROM all_types WHERE k = ? AND v = ?", 1, "héllo 'q'")
row = tuple(cur.fetchone())
want = (1, 9000000000, decimal.Decimal("12345.678"), datetime.date(2026, 8, 1), datetime.datetime(2026, 8, 1, 10, 20, 30), "héllo 'q'")
assert row == want, (row, want)
cur.execute("INSERT INTO all_types (k, v) VALUES (?, ?)", 5, "five")
assert cur.execute("SELECT v FROM all_types WHERE k = ?", 5).fetchval() == "five"
tables = [t.table_name for t in cur.tables(table="all_types", catalog="odbc_db")]
assert tables == ["all_types"], tables
cols = [(col.column_name, col.type_name) for col in cur.columns(table="all_types", catalog="odbc_db")]
assert len(cols) == 16 and cols[0] == ("k", "INT") and cols[9] == ("amount", "DECIMAL"), cols
print("pyodbc ok")
PY
echo "odbc ok"
