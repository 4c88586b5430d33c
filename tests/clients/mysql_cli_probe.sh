#!/usr/bin/env bash
# The mysql command-line client (Debian's MariaDB client) against a running
# Tethys: batch and table output, column types, a prepared statement with
# parameters, and the metadata commands the shell itself sends.
# Usage: mysql_cli_probe.sh PORT SQL_FILE. Exits non-zero on the first mismatch.
set -euo pipefail
port="$1"
sql_file="$2"
fail() { echo "mysql cli probe: $*" >&2; exit 1; }
m() { mysql -h127.0.0.1 -P"$port" -uroot --batch --skip-column-names "$@"; }

m -e "CREATE DATABASE cli_db"
m cli_db < "$sql_file" || fail "load"
got="$(m cli_db -e "SELECT * FROM all_types ORDER BY k")"
want="$(printf '%s\n' \
  "1	1	-5	300	70000	9000000000	12345678901234567890123456789012345678	1.5	2.25	12345.678	2026-08-01	2026-08-01 10:20:30	2026-08-01 10:20:30.123	ab	héllo 'q'	long text" \
  "2	NULL	NULL	NULL	NULL	NULL	NULL	NULL	NULL	NULL	NULL	NULL	NULL	NULL	NULL	NULL")"
[ "$got" = "$want" ] || fail "rows: got
$got
want
$want"

# Column types as the shell reports them (--column-type-info).
info="$(mysql -h127.0.0.1 -P"$port" -uroot --column-type-info -t cli_db -e "SELECT k, bi, amount, dt, ts, v FROM all_types WHERE k = 1")"
for t in LONG LONGLONG NEWDECIMAL DATE DATETIME VAR_STRING; do
  grep -qE "^Type: +$t\$" <<< "$info" || fail "column type $t missing: $info"
done

# A prepared statement with parameters, in SQL.
got="$(m cli_db -e "PREPARE q FROM 'SELECT v, amount FROM all_types WHERE k = ? AND amount > ?'; SET @k = 1, @min = 100; EXECUTE q USING @k, @min; DEALLOCATE PREPARE q")"
[ "$got" = "héllo 'q'	12345.678" ] || fail "prepared: $got"

# What the shell sends for itself: the banner's version comment, and SHOW
# statements with their MySQL columns.
got="$(m -e "SELECT @@version_comment LIMIT 1")"
[[ "$got" == Tethys* ]] || fail "version comment: $got"
got="$(m cli_db -e "SHOW FULL TABLES")"
[ "$got" = "all_types	BASE TABLE" ] || fail "show full tables: $got"
got="$(mysql -h127.0.0.1 -P"$port" -uroot --batch cli_db -e "SHOW TABLE STATUS" | head -1 | tr '\t' ' ')"
[ "$got" = "Name Engine Version Row_format Rows Avg_row_length Data_length Max_data_length Index_length Data_free Auto_increment Create_time Update_time Check_time Collation Checksum Create_options Comment" ] || fail "table status columns: $got"
got="$(m cli_db -e "SHOW FULL COLUMNS FROM all_types LIKE 'k'")"
[ "$got" = "k	int		No	true	NULL		select,insert,update,references	the key" ] || fail "full columns: $got"
got="$(m -e "SHOW COLLATION LIKE 'utf8mb4_bin'" | cut -f1,2)"
[ "$got" = "utf8mb4_bin	utf8mb4" ] || fail "collation: $got"
out="$(m cli_db -e "SHOW INDEX FROM nope" 2>&1 || true)"
grep -q "ERROR 1146" <<< "$out" || fail "SHOW INDEX of a missing table must fail: $out"
echo "mysql cli ok"
