#!/usr/bin/env bash
# Runs every test: installs the test servers (MinIO, fake-gcs-server) when
# missing, checks formatting, vet, go.mod tidiness and staticcheck, then runs
# go test, the race detector and the fuzz targets. Under CI=true a
# test that needs a server it cannot start fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."

# timed runs one step and prints how long it took, and how much of the
# machine's cores its processes used (user and system time of the
# finished children, from the shell's times), so that the log shows how
# the two lanes below balance and what each step costs.
cpu_dir=$(mktemp -d)
trap 'rm -rf "$cpu_dir"' EXIT
timed() {
  local start=$SECONDS before
  children_cpu
  before=$cpu_ms
  "$@"
  children_cpu
  echo "--- ${*:1:6} ...: $((SECONDS - start)) s, $(((cpu_ms - before) / 1000)) s of CPU"
}
# children_cpu sets cpu_ms to the user and system time of this shell's
# finished children, in milliseconds. times runs in this shell: in a
# command substitution, a subshell of its own, it would see no children.
# Each (sub)shell writes a file of its own: the lanes below run at once.
children_cpu() {
  times >"$cpu_dir/$BASHPID"
  local u s
  { read -r _ _; read -r u s; } <"$cpu_dir/$BASHPID"
  cpu_ms=$(($(to_ms "$u") + $(to_ms "$s")))
}
# to_ms prints a duration as times writes it (1m2.345s) in milliseconds.
to_ms() {
  local m=${1%%m*} sec=${1#*m}
  sec=${sec%s}
  echo $(((10#$m * 60 + 10#${sec%.*}) * 1000 + 10#${sec#*.}))
}

# Test binaries are linked without DWARF (-w): about a third less time
# linking each of the ~50 test binaries; stack traces keep their file and
# line (those come from the symbol table, which stays).
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-ldflags=-w"

timed scripts/install-test-deps.sh

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.tools/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" $unformatted >&2
  exit 1
fi
# go vet runs its testinggoroutine analyzer (t.Fatal or t.FailNow in a
# goroutine a test started); staticcheck, below, its SA2002 check of the
# same. The layering of imports and the lengths of functions and files are
# tests (harness/houserules), run with the others; .golangci.yml holds the
# same layering for golangci-lint, which this script does not build (it
# would take minutes of the machine's two cores).
timed go vet ./...
if ! go mod tidy -diff >/dev/null; then
  echo "go.mod or go.sum is not tidy: run go mod tidy" >&2
  exit 1
fi
# staticcheck is pinned in go.mod (tool directive).
timed go tool staticcheck ./...
# Two lanes run side by side, each in a subshell of its own (where set -e
# holds) with its output kept in a file and printed when it ends: the
# machine's two cores go to the compiled tests and the race detector, while
# the end-to-end tests, the Python client's and the alert rules', which
# spend most of their time waiting on servers, sleeps and timeouts, run
# beside them, then the memory bounds and the fuzz targets, on what the
# first lane leaves of the cores. The script fails if either lane fails.
# The packages whose goroutines share state (the engine and the Job own
# the background tasks) run under the race detector, below; every other
# package runs here. Their volume tests (named TestVolume...: large
# fragments, budgets measured in row groups, histories of many seeds, a
# crash at every point) start no goroutines themselves (what they call
# does, and the raced tests cover it) and take 10 to 20 times as long
# under the detector (compactor's 307 s of the cores
# against 30 s): they run without it, and every other test of those
# packages with it. The raced packages are listed longest first, so that
# go test's two lanes end together.
raced="compactor table walshard commit server engine job table/fragment"
volume="compactor table walshard"
compiled() {
  timed go test -count=1 -timeout 30m "$@" $(go list ./... | grep -v '/e2e$' | grep -v -E "/($(echo $raced | tr ' ' '|'))\$")
  timed go test -count=1 -timeout 15m -run '^TestVolume' "$@" $(printf './%s ' $volume)
  # The simulation's planted defects exist only in a build with the tag
  # strata_plant; each must be found within the campaign's seeds. Vet and
  # staticcheck look at that build too.
  timed go vet -tags strata_plant ./internal/... ./harness/...
  timed go test -tags strata_plant -count=1 -timeout 15m -run TestPlantedDefectsAreFound "$@" ./harness/sim
  # The race detector over the packages whose goroutines share state:
  # their tests, every one but the volume tests, run here (and only here:
  # the machine has two cores).
  timed go test -race -count=1 -timeout 30m -skip '^TestVolume' "$@" $(printf './%s ' $raced)
}
beside() {
  # The binaries, built once for the end-to-end tests and the Python
  # client's (with the checkout's revision, as a release build).
  local bins
  bins=$(mktemp -d)
  timed go build -buildvcs=true -o "$bins/" ./cmd/strata ./cmd/strata-engine ./cmd/strata-full ./cmd/strata-compactor ./cmd/strata-iceberg ./cmd/strata-sim
  # The end-to-end tests run verbosely: they print the rows, kills and
  # restarts they saw. Those that spend their time waiting on processes
  # (a drop waits out a minute of fencing) run four at a time, after the
  # others, one of which stops MinIO.
  timed env STRATA_E2E_BINS="$bins" go test -count=1 -timeout 15m -parallel 4 -v "$@" ./e2e
  # The Python client against a real server, with the machine's python3
  # (the system one when it has pandas: scripts/install-test-deps.sh
  # installs it).
  local py=python3
  if /usr/bin/python3 -c "import pandas" 2>/dev/null; then
    py=/usr/bin/python3
  fi
  if command -v "$py" >/dev/null; then
    timed env STRATA_BIN="$bins/strata" "$py" -m unittest discover -s clients/python/tests -v
  elif [ "${CI:-}" != "" ] && [ "${CI:-}" != "false" ] && [ "${CI:-}" != "0" ]; then
    echo "python3 is missing: the Python client's tests cannot run" >&2
    return 1
  else
    echo "python3 is missing: skipping the Python client's tests" >&2
  fi
  rm -rf "$bins"
  # The alert rules: each fires when it should and only then.
  if command -v promtool >/dev/null; then
    promtool check rules deploy/prometheus-rules.yaml
    promtool test rules deploy/prometheus-rules.test.yaml
  elif [ "${CI:-}" != "" ] && [ "${CI:-}" != "false" ] && [ "${CI:-}" != "0" ]; then
    echo "promtool is missing: the alert rules cannot be tested" >&2
    return 1
  else
    echo "promtool is missing: skipping the alert rules' tests" >&2
  fi
  # Compaction's memory bound, in a process of its own: 2,000 fragments
  # (935 MB of rows) compacted within 512 MiB of peak RSS, copying pages
  # (162–184 MiB measured), decoding them (381 MiB), and sorting them by a
  # cluster key in runs spilled and merged (452–459 MiB).
  timed env STRATA_MEMORY_BOUND_MIB=512 go test -run '^$' -bench CompactionMemory -benchtime 1x ./compactor
  # The server's memory bound, in a process of its own: sixteen clients
  # scanning a 50 MB table twice each and an appender, against a budget of
  # 128 MiB; it fails above the budget and server.FixedOverhead (320 MiB of
  # peak RSS; 266–284 MiB measured) or when an append is refused.
  timed go test -run '^$' -bench ServerMemory -benchtime 1x ./server
  # Fuzz targets, each for a bounded number of executions (2 to 6 s each
  # here; FUZZTIME overrides, e.g. FUZZTIME=2m). A count, not a duration: Go
  # 1.26 can fail a duration-bounded run with "context deadline exceeded" at
  # its end, having found nothing (golang/go#75804). Their seeds and the
  # corpus kept under each package's testdata/fuzz/<target>/ run as tests in
  # the other lane, and each run starts from that corpus. A failing input is
  # written there and fails the run; scripts/save-fuzz-corpus.sh keeps the
  # new interesting inputs a longer session found. Each package's
  # test binary is built once and run for each of its targets from the
  # package's folder, as go test -fuzz runs it, with go test's cache of
  # interesting inputs: linking it again for every target cost about 20 s
  # each. It is instrumented for coverage where the inputs are decoded:
  # Strata's packages, arrow-go's readers (Parquet, IPC, CSV) and the
  # standard library's encodings. go test -fuzz instruments every package
  # the binary links, the cloud SDKs and gRPC included: each execution
  # then scans counters for all of them (table's targets ran 1,150 to
  # 1,500 executions a second, against 4,800 to 5,100 so), and a cold
  # machine compiles them all again for nothing the targets reach.
  fuzz() {
    local pkg=$1
    shift
    local dir bin
    dir=$(mktemp -d)
    bin="$dir/$(basename "$pkg").fuzz"
    local a=github.com/apache/arrow-go/v18 i=-d=libfuzzer
    timed go test -c -o "$bin" -gcflags "github.com/stratadb/strata/...=$i" -gcflags "encoding/...=$i" \
      -gcflags "$a/parquet/...=$i" -gcflags "$a/arrow/ipc/...=$i" -gcflags "$a/arrow/csv/...=$i" "$pkg"
    local cache
    cache="$(go env GOCACHE)/fuzz/$(go list "$pkg")"
    while [ $# -gt 0 ]; do
      (cd "$pkg" && timed "$bin" -test.run '^$' -test.fuzz "^$1\$" -test.fuzztime "${FUZZTIME:-$2}" \
        -test.fuzzminimizetime 200x -test.fuzzcachedir "$cache" -test.paniconexit0)
      shift 2
    done
    rm -rf "$dir"
  }
  fuzz ./server FuzzAppendIPC 1000x FuzzAppendJSONLines 3000x
  fuzz ./internal/ingest FuzzReadIPC 4000x FuzzReadCSV 10000x FuzzParquetFile 6000x
  fuzz ./walshard/wal FuzzDecodeEntry 40000x
  fuzz ./table FuzzDecodeColumnsAtOnce 6000x FuzzDecodeDeletions 40000x FuzzDecodeIndex 40000x FuzzDecodeHashIndex 20000x \
    FuzzParseFilter 20000x FuzzDecodeManifest 40000x FuzzDecodeManifestPayload 40000x \
    FuzzDecodeManifestFrames 40000x
}
compiled_log=$(mktemp)
beside_log=$(mktemp)
(compiled "$@") >"$compiled_log" 2>&1 &
compiled_pid=$!
(beside "$@") >"$beside_log" 2>&1 &
beside_pid=$!
beside_status=0
wait $beside_pid || beside_status=$?
cat "$beside_log"
echo "=== the lane of the end-to-end, Python, alert rules', memory and fuzz tests: exit $beside_status"
compiled_status=0
wait $compiled_pid || compiled_status=$?
cat "$compiled_log"
echo "=== the compiled tests' and race detector's lane: exit $compiled_status"
rm -f "$compiled_log" "$beside_log"
children_cpu
echo "=== all: $SECONDS s, $((cpu_ms / 1000)) s of CPU"
if [ $beside_status -ne 0 ] || [ $compiled_status -ne 0 ]; then
  exit 1
fi
