#!/usr/bin/env bash
# Stream Load throughput on the README's orders table.
# Usage: benches/stream_load_orders.sh [rows] [mysql-port] [fe-http-port]
# Needs a running Tethys (`tethys standalone`), python3, curl and the mysql
# client. Prints the Stream Load response, wall time, rows/s and MB/s, and the
# server's peak RSS. Numbers depend on the build (debug vs release).
set -euo pipefail
rows=${1:-1000000}; port=${2:-9030}; http=${3:-8030}
csv=$(mktemp --suffix=.csv); trap 'rm -f "$csv"' EXIT
mysql -h127.0.0.1 -P"$port" -uroot -e 'CREATE DATABASE IF NOT EXISTS bench; CREATE TABLE IF NOT EXISTS bench.orders (created_at DATETIME NOT NULL, region VARCHAR(32), category VARCHAR(32), order_id BIGINT NOT NULL, user_id BIGINT, amount DECIMAL(10, 2), status VARCHAR(16)) DUPLICATE KEY(created_at, region, category) PARTITION BY RANGE(created_at) (PARTITION p202607 VALUES [("2026-07-01"), ("2026-08-01")), PARTITION p202608 VALUES [("2026-08-01"), ("2026-09-01")), PARTITION p202609 VALUES [("2026-09-01"), ("2026-10-01"))) DISTRIBUTED BY HASH(order_id) BUCKETS 10'
python3 - "$rows" "$csv" <<'PY'
import datetime, sys
n, path = int(sys.argv[1]), sys.argv[2]
base = datetime.datetime(2026, 7, 1)
regions, cats, st = ['north', 'south', 'east', 'west'], ['books', 'toys', 'food'], ['new', 'paid', 'shipped']
step = max(1, (92 * 86400 - 1) // n)
with open(path, 'w') as f:
    for i in range(n):
        d = base + datetime.timedelta(seconds=i * step)
        f.write(f'{d:%Y-%m-%d %H:%M:%S},{regions[i%4]},{cats[i%3]},{i},{i%9973},{(i%100000)/100:.2f},{st[i%3]}\n')
PY
bytes=$(stat -c %s "$csv")
start=$(date +%s.%N)
curl -s --location-trusted -u root: -H "column_separator:," -T "$csv" "http://127.0.0.1:$http/api/bench/orders/_stream_load"
end=$(date +%s.%N)
python3 -c "t=$end-$start; print(f'\nrows={$rows} bytes={$bytes} seconds={t:.1f} rows_per_s={$rows/t:.0f} MB_per_s={$bytes/t/1e6:.2f}')"
pid=$(pgrep -f "tethys standalone" | head -1 || true)
[ -n "$pid" ] && grep VmHWM "/proc/$pid/status" || true
