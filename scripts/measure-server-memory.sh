#!/usr/bin/env bash
# Measures the peak memory (VmHWM) of `strata serve` under the requests
# that used to make it grow without bound: four concurrent JSON-lines
# scans of a compacted 200,000-row rollouts table (one client reading slowly), and
# takes of many keys. Usage:
#
#   scripts/measure-server-memory.sh [STRATA_BINARY] [MEMORY_BUDGET_BYTES]
#
# It builds ./cmd/strata (and the strata-engine and strata-full it runs)
# when no binary is given. Figures go to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-}
budget=${2:-1073741824}
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
if [ -z "$bin" ]; then
  bin=$work/strata
  go build -o "$work/" ./cmd/strata ./cmd/strata-engine ./cmd/strata-full
fi
echo "building a 200,000-row table (4 writers x 50 commits x 1,000 rows)" >&2
"$bin" bench --phases=ingest --writers=4 --commits=50 --rows=1000 --dir="$work/tables/rollouts" >/dev/null
# Compacted, as a table that has run for a while is: large fragments,
# read by ranged requests a row group at a time.
"$bin" compact "file://$work/tables/rollouts" >/dev/null
port=$((20000 + RANDOM % 20000))
flags=(--bucket "file://$work/tables" --listen "127.0.0.1:$port")
if "$bin" serve --help 2>&1 | grep -q -- --memory-budget; then
  flags+=(--memory-budget "$budget")
fi
"$bin" serve "${flags[@]}" >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break
  sleep 0.1
done
hwm() { awk '/VmHWM/ {print int($2/1024)}' "/proc/$pid/status"; }
url="http://127.0.0.1:$port/api/v1/tables/rollouts"
echo "idle: peak RSS $(hwm) MiB"
start=$(date +%s.%N)
for i in 1 2 3; do
  curl -s -o /dev/null -w "scan $i: %{http_code}, %{size_download} bytes\n" "$url/rows?format=jsonl" &
done
curl -s -o /dev/null --limit-rate 10M -w "slow scan: %{http_code}, %{size_download} bytes\n" "$url/rows?format=jsonl" &
wait %2 %3 %4 %5 2>/dev/null || wait
echo "four concurrent JSON-lines scans (one at 10 MB/s): peak RSS $(hwm) MiB, $(echo "$(date +%s.%N) - $start" | bc) s"
python3 -c 'import json; print(json.dumps({"keys": list(range(7_000_000))}))' >"$work/take7m.json"
curl -s -o /dev/null -w "take of 7,000,000 keys: %{http_code}\n" -H 'Content-Type: application/json' --data-binary "@$work/take7m.json" "$url/take"
echo "after the 7M-key take: peak RSS $(hwm) MiB"
python3 -c 'import json; print(json.dumps({"keys": [w * 10**9 + s for w in range(4) for s in range(0, 50000, 10)]}))' >"$work/take20k.json"
curl -s -o /dev/null -w "take of 20,000 keys: %{http_code}, %{size_download} bytes\n" -H 'Content-Type: application/json' --data-binary "@$work/take20k.json" "$url/take"
echo "after the 20,000-key take: peak RSS $(hwm) MiB"
echo "memory budget: $((budget / 1048576)) MiB"
