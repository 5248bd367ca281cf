#!/usr/bin/env bash
# Sets Strata beside LanceDB on the rollouts workload (docs/benchmark.md),
# in one run, on three stores: a local folder, MinIO on
# 127.0.0.1, and the same MinIO behind a proxy that holds every request
# DELAY (default 20ms) ± JITTER (default 2ms) — both systems go through the
# same proxy, so both pay the same round trip; with MBPS set, the proxy also
# passes each response no faster than MBPS MB/s, as one connection to a
# remote store does. Prints one table per run.
# Both time their scans from a table already open (LanceDB's benchmark
# opens the table before its timers start); Strata's open is shown apart.
#
#   scripts/compare-lancedb.sh            # RUNS=3 by default
#   RUNS=1 DELAY=30ms scripts/compare-lancedb.sh
#   RUNS=1 MBPS=100 scripts/compare-lancedb.sh
#
# Needs Go, Node.js and npm, and LANCE_BENCH: a folder holding LanceDB's
# program for the workload (bench.mjs, taking the flags of
# docs/benchmark.md and printing its JSON lines) with the package.json and
# package-lock.json it runs with. LanceDB (@lancedb/lancedb from npm) is
# installed once into .tools/lancedb from that lock file.
#
#   LANCE_BENCH=/path/to/lancedb-bench scripts/compare-lancedb.sh
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
DELAY=${DELAY:-20ms}
JITTER=${JITTER:-2ms}
MBPS=${MBPS:-0}
lance_src=${LANCE_BENCH:?set LANCE_BENCH to the folder of the LanceDB program for the workload (see the top of this script)}
lance_src=$(cd "$lance_src" && pwd)
tools="$PWD/.tools"
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

scripts/install-test-deps.sh
if [ ! -d "$tools/lancedb/node_modules/@lancedb" ]; then
  echo "installing LanceDB into .tools/lancedb (once)" >&2
  mkdir -p "$tools/lancedb"
  cp "$lance_src/package.json" "$lance_src/package-lock.json" "$tools/lancedb/"
  (cd "$tools/lancedb" && npm ci --no-audit --no-fund >&2)
fi
go build -o "$work/" ./cmd/strata ./cmd/strata-engine
go build -o "$work/latency-proxy" ./harness/latencyproxy/cmd/latency-proxy

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# MinIO, and a bucket for each system.
export AWS_ACCESS_KEY_ID=strata AWS_SECRET_ACCESS_KEY=strata-secret AWS_REGION=us-east-1
mport=$(free_port)
MINIO_ROOT_USER=$AWS_ACCESS_KEY_ID MINIO_ROOT_PASSWORD=$AWS_SECRET_ACCESS_KEY \
  "$tools/bin/minio" server "$work/minio" --address "127.0.0.1:$mport" --quiet >"$work/minio.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$mport/minio/health/live" >/dev/null && break
  sleep 0.1
done
pport=$(free_port)
"$work/latency-proxy" --target "http://127.0.0.1:$mport" --listen "127.0.0.1:$pport" --delay "$DELAY" --jitter "$JITTER" --mb-per-s "$MBPS" 2>"$work/proxy.log" &
pids+=($!)
sleep 0.5

bucket() { # endpoint name
  curl -sf --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -X PUT "$1/$2" >/dev/null || true
}
wipe() { # name: empty the bucket between runs
  rm -rf "$work/minio/$1"/* 2>/dev/null || true
}

strata_bench() { # store-args... ; prints JSON lines
  "$work/strata" bench "$@" 2>>"$work/strata.log"
}
lance_bench() {
  (cd "$tools/lancedb" && NODE_PATH="$tools/lancedb/node_modules" node --expose-gc "$lance_src/bench.mjs" "$@" 2>>"$work/lance.log")
}

for run in $(seq "$RUNS"); do
  out="$work/run$run.jsonl"
  : >"$out"
  for store in file minio proxy; do
    case $store in
      file)
        sargs=(--store=file --dir="$work/strata-file")
        largs=(--store=file --dir="$work/lance-file")
        rm -rf "$work/strata-file" "$work/lance-file" ;;
      minio|proxy)
        ep="http://127.0.0.1:$mport"
        [ "$store" = proxy ] && ep="http://127.0.0.1:$pport"
        bucket "http://127.0.0.1:$mport" "strata-$store"
        bucket "http://127.0.0.1:$mport" "lance-$store"
        wipe "strata-$store"; wipe "lance-$store"
        sargs=(--store=s3 --s3-endpoint="$ep" --s3-bucket="strata-$store")
        largs=(--store=s3 --s3-endpoint="$ep" --s3-bucket="lance-$store" --s3-access-key="$AWS_ACCESS_KEY_ID"
          --s3-secret-key="$AWS_SECRET_ACCESS_KEY" --s3-region="$AWS_REGION") ;;
    esac
    echo "run $run: $store" >&2
    strata_bench "${sargs[@]}" --phases=ingest,scan-before,compact,scan-after | sed "s/^{/{\"cmp\":\"strata\",\"where\":\"$store\",/" >>"$out"
    [ "$store" = file ] || wipe "strata-$store"
    [ "$store" = file ] && rm -rf "$work/strata-file"
    strata_bench "${sargs[@]}" --mode=shard --phases=ingest | sed "s/^{/{\"cmp\":\"strata-shards\",\"where\":\"$store\",/" >>"$out"
    [ "$store" = file ] || wipe "strata-$store"
    [ "$store" = file ] && rm -rf "$work/strata-file"
    strata_bench "${sargs[@]}" --mode=shard --reuse-bytes=131072 --phases=ingest | sed "s/^{/{\"cmp\":\"strata-shards-once\",\"where\":\"$store\",/" >>"$out"
    lance_bench "${largs[@]}" --phases=ingest,scan-before,compact,scan-after | sed "s/^{/{\"cmp\":\"lancedb\",\"where\":\"$store\",/" >>"$out"
  done
  pace=""
  [ "$MBPS" = 0 ] || pace=", $MBPS MB/s per response"
  echo "## run $run (proxy: $DELAY ± $JITTER per request$pace)"
  python3 - "$out" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def get(cmp, where, phase, key):
    for r in rows:
        if r.get("cmp") == cmp and r.get("where") == where and r.get("phase") == phase and key in r:
            return r[key]
    return None
def fmt(v, unit):
    if v is None:
        return "—"
    return f"{v:,.0f}{unit}" if unit in (" rows/s", " ms", " bytes") else f"{v:.3f}{unit}"
lines = [
    ("ingest, direct", "ingest", "rows_per_s", " rows/s", "strata", True),
    ("ingest, shards", "ingest", "rows_per_s", " rows/s", "strata-shards", True),
    ("ingest, shards, rows written once", "ingest", "rows_per_s", " rows/s", "strata-shards-once", True),
    ("ingest p99, direct", "ingest", "p99_ms", " ms", "strata", False),
    ("ingest max, direct", "ingest", "max_ms", " ms", "strata", False),
    ("full scan, 200 fragments", "scan-before", "full_s", " s", "strata", False),
    ("projected scan (id, reward), 200 fragments", "scan-before", "proj_s", " s", "strata", False),
    ("projected scan, bytes read (Strata's)", "scan-before", "proj_bytes_read", " bytes", "strata", False),
    ("filtered count (reward >= 0.9), 200 fragments", "scan-before", "count_s", " s", "strata", False),
    ("compact 200 → 1", "compact", "wall_s", " s", "strata", False),
    ("full scan after compaction", "scan-after", "full_s", " s", "strata", False),
    ("projected scan after compaction", "scan-after", "proj_s", " s", "strata", False),
    ("projected scan after compaction, bytes read (Strata's)", "scan-after", "proj_bytes_read", " bytes", "strata", False),
    ("open the latest version (Strata's, apart)", "scan-after", "open_s", " s", "strata", False),
]
print("| phase | store | Strata | LanceDB | Strata ÷ LanceDB |")
print("|---|---|---|---|---|")
for where in ("file", "minio", "proxy"):
    for label, phase, key, unit, cmp, _ in lines:
        s, l = get(cmp, where, phase, key), get("lancedb", where, phase, key)
        ratio = f"{s / l:.2f}×" if s is not None and l else "—"
        print(f"| {label} | {where} | {fmt(s, unit)} | {fmt(l, unit)} | {ratio} |")
    for label, cmp in (("store bytes ÷ logical bytes, shards", "strata-shards"), ("store bytes ÷ logical bytes, shards, rows written once", "strata-shards-once")):
        print(f"| {label} | {where} | {fmt(get(cmp, where, 'ingest', 'store_bytes_per_logical_byte'), '')} | — | — |")
EOF
done
