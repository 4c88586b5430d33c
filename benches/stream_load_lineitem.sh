#!/usr/bin/env bash
# Stream Load throughput on TPC-H lineitem, next to DuckDB loading the same
# file on the same machine in the same run.
#
# Usage: benches/stream_load_lineitem.sh [scale-factor]      (default 1)
#
# Generates lineitem with tpchgen-cli (pip), starts a release `tethys
# standalone` on free ports with a fresh data directory, creates the table
# from benches/tpch/ddl.sql, loads the .tbl file through the FE
# (307 -> BE) with curl, and prints rows/s, MB/s, the server's peak RSS and
# the stored size; then times DuckDB's CREATE TABLE AS read_csv on the file.
set -euo pipefail
sf=${1:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
data=${TPCH_DATA:-$root/benches/data/tpch-sf$sf}
target=${CARGO_TARGET_DIR:-$root/target}
bin=$target/release/tethys

step() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }

pip install -q tpchgen-cli duckdb pymysql >/dev/null 2>&1 || true
if [ ! -s "$data/lineitem.tbl" ]; then
    step "generating lineitem at SF$sf into $data"
    mkdir -p "$data"
    tpchgen-cli -s "$sf" --tables lineitem --output-dir "$data"
fi
step "building tethys (release)"
(cd "$root" && cargo build --release --bin tethys -q)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
q=$(free_port); h=$(free_port); bh=$(free_port); bp=$(free_port); fr=$(free_port)
dir=$(mktemp -d)
"$bin" standalone --data-dir "$dir" --query-port "$q" --http-port "$h" \
    --be-http-port "$bh" --be-port "$bp" --fe-rpc-port "$fr" >/dev/null 2>"$dir.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir" "$dir.log"' EXIT
sql() {
    python3 - "$q" "$1" <<'PY'
import sys, time, pymysql
port, text = int(sys.argv[1]), sys.argv[2]
for _ in range(100):
    try:
        c = pymysql.connect(host="127.0.0.1", port=port, user="root", autocommit=True)
        break
    except Exception:
        time.sleep(0.2)
cur = c.cursor()
for stmt in [s for s in text.split(";") if s.strip()]:
    cur.execute(stmt)
for row in cur.fetchall() or []:
    print(*row, sep="\t")
PY
}
sql "CREATE DATABASE tpch; USE tpch; $(grep -v "^--" "$root/benches/tpch/ddl.sql")"

cols="l_orderkey,l_partkey,l_suppkey,l_linenumber,l_quantity,l_extendedprice,l_discount,l_tax,l_returnflag,l_linestatus,l_shipdate,l_commitdate,l_receiptdate,l_shipinstruct,l_shipmode,l_comment,l_end"
bytes=$(stat -c %s "$data/lineitem.tbl")
step "stream loading $((bytes / 1000000)) MB"
start=$(date +%s.%N)
resp=$(curl -s --location-trusted -u root: -H "Expect: 100-continue" -H "label:lineitem_sf$sf" \
    -H "column_separator:|" -H "columns:$cols" -T "$data/lineitem.tbl" \
    "http://127.0.0.1:$h/api/tpch/lineitem/_stream_load")
end=$(date +%s.%N)
echo "$resp"
rows=$(sql "SELECT count(*) FROM tpch.lineitem")
hwm=$(grep VmHWM "/proc/$pid/status" | awk '{print $2}')
stored=$(du -sb "$dir/be" | cut -f1)
python3 - "$start" "$end" "$rows" "$bytes" "$hwm" "$stored" "$sf" <<'PY'
import sys
start, end, rows, size, hwm, stored, sf = sys.argv[1:]
t = float(end) - float(start)
rows, size, hwm, stored = int(rows), int(size), int(hwm), int(stored)
print(f"tethys: sf={sf} rows={rows} csv_bytes={size} seconds={t:.1f} "
      f"rows_per_s={rows/t:,.0f} MB_per_s={size/t/1e6:.1f} peak_rss_MB={hwm/1024:.0f} "
      f"stored_MB={stored/1e6:.0f} ({stored/size:.2f} of the CSV)")
PY
step "DuckDB loading the same file"
python3 - "$data/lineitem.tbl" <<'PY'
import sys, time, duckdb, os
path = sys.argv[1]
con = duckdb.connect()
cols = {"l_orderkey": "BIGINT", "l_partkey": "INT", "l_suppkey": "INT", "l_linenumber": "INT",
        "l_quantity": "DECIMAL(15,2)", "l_extendedprice": "DECIMAL(15,2)", "l_discount": "DECIMAL(15,2)",
        "l_tax": "DECIMAL(15,2)", "l_returnflag": "VARCHAR", "l_linestatus": "VARCHAR",
        "l_shipdate": "DATE", "l_commitdate": "DATE", "l_receiptdate": "DATE",
        "l_shipinstruct": "VARCHAR", "l_shipmode": "VARCHAR", "l_comment": "VARCHAR", "l_end": "VARCHAR"}
t = time.time()
con.execute(f"CREATE TABLE lineitem AS SELECT * EXCLUDE (l_end) FROM read_csv('{path}', delim='|', header=false, columns={cols})")
t = time.time() - t
n = con.execute("SELECT count(*) FROM lineitem").fetchone()[0]
size = os.path.getsize(path)
print(f"duckdb {duckdb.__version__}: rows={n} seconds={t:.1f} rows_per_s={n/t:,.0f} MB_per_s={size/t/1e6:.1f} (in-memory table, {os.cpu_count()} threads)")
PY
