package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func runSmall(t *testing.T, cfg Config) []map[string]any {
	t.Helper()
	cfg.Writers, cfg.Commits, cfg.Rows, cfg.Seed = 3, 4, 50, 42
	cfg.ConcWriters, cfg.ConcCommits, cfg.TargetRows = 2, 3, 1_000_000
	if cfg.Phases == nil {
		cfg.Phases = []string{"ingest", "scan-before"}
	}
	var out, log bytes.Buffer
	if err := Run(context.Background(), cfg, &out, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	var lines []map[string]any
	for line := range strings.Lines(out.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout line %q is not JSON: %v", line, err)
		}
		lines = append(lines, m)
	}
	return lines
}

func checkLines(t *testing.T, lines []map[string]any, store string) {
	t.Helper()
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want ingest and scan-before", len(lines))
	}
	in, sc := lines[0], lines[1]
	if in["phase"] != "ingest" || in["store"] != store || in["system"] != "strata" || in["rows"] != 600.0 ||
		in["versions"] != 13.0 || in["fragments"] != 12.0 || in["logical_bytes"] != 600.0*2339 {
		t.Fatalf("ingest line %v", in)
	}
	for _, k := range []string{"wall_s", "rows_per_s", "mb_per_s", "p50_ms", "p99_ms", "max_ms", "conflicts", "cpu_s", "peak_rss_mb"} {
		if _, ok := in[k]; !ok {
			t.Fatalf("ingest line lacks %s: %v", k, in)
		}
	}
	if sc["phase"] != "scan-before" || sc["rows"] != 600.0 {
		t.Fatalf("scan line %v", sc)
	}
	// reward >= 0.9 over the generated rows, counted independently.
	want := 0
	for w := range 3 {
		for seq := range int64(200) {
			if rollouts.Generate(42, w, seq).Reward >= 0.9 {
				want++
			}
		}
	}
	if c := sc["count_rows"].(float64); c != float64(want) {
		t.Fatalf("count_rows %v, want %d", c, want)
	}
	// Each scan says what it read from the store: the twelve fragments'
	// bytes at most, and one request each at least.
	stored := 0.0
	for _, k := range []string{"full", "proj", "count"} {
		req, read := sc[k+"_requests"].(float64), sc[k+"_bytes_read"].(float64)
		if req < 12 || read < 1 {
			t.Fatalf("scan line %v: want %s_requests (at least one a fragment) and %s_bytes_read", sc, k, k)
		}
		stored = max(stored, read)
	}
	if full := sc["full_bytes_read"].(float64); full != stored {
		t.Fatalf("scan line %v: the full scan read less than another", sc)
	}
}

func TestBenchOnFile(t *testing.T) {
	checkLines(t, runSmall(t, Config{Store: "file", Dir: t.TempDir()}), "file")
}

func TestBenchOnMinIO(t *testing.T) {
	srv := testenv.MinIO(t)
	checkLines(t, runSmall(t, Config{Store: "s3", S3Endpoint: srv.Endpoint, S3Bucket: srv.Bucket}), "s3")
}

func TestBenchRefusesUnknownAndMissingPhases(t *testing.T) {
	var out, log bytes.Buffer
	for _, p := range []string{"nope", "scan"} {
		err := Run(context.Background(), Config{Phases: []string{p}, Store: "file", Dir: t.TempDir()}, &out, &log)
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Fatalf("phase %q: %v", p, err)
		}
	}
	if out.Len() != 0 {
		t.Fatalf("stdout holds %q", out.String())
	}
}

func TestBenchShardModeOnMinIO(t *testing.T) {
	srv := testenv.MinIO(t)
	lines := runSmall(t, Config{Store: "s3", S3Endpoint: srv.Endpoint, S3Bucket: srv.Bucket, Mode: "shard"})
	in := lines[0]
	if in["mode"] != "shard" || in["rows"] != 600.0 || in["requests_per_mb"] == nil || lines[1]["rows"] != 600.0 {
		t.Fatalf("shard-mode lines %v", lines)
	}
}

func TestBenchAllPhasesOnFile(t *testing.T) {
	lines := runSmall(t, Config{Store: "file", Dir: t.TempDir(), Phases: AllPhases})
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5", len(lines))
	}
	c := lines[2]
	if c["phase"] != "compact" || c["fragments_before"] != 12.0 || c["fragments_after"] != 1.0 || c["rows_before"] != 600.0 || c["rows_after"] != 600.0 {
		t.Fatalf("compact line %v", c)
	}
	if lines[3]["phase"] != "scan-after" || lines[3]["rows"] != 600.0 {
		t.Fatalf("scan-after line %v", lines[3])
	}
	cc := lines[4]
	if cc["phase"] != "concurrent" || cc["ok"] != true || cc["rows"] != 900.0 || cc["distinct_ids"] != 900.0 {
		t.Fatalf("concurrent line %v", cc)
	}
}

// With an emulated round trip the phases still check out, and every
// request waits for it.
func TestStoreLatencyDelaysEveryRequest(t *testing.T) {
	cfg := Config{StoreLatency: time.Millisecond}
	b, err := cfg.open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	f, ok := b.(*fault.Bucket)
	if !ok {
		t.Fatalf("bucket is a %T, want the latency wrapper", b)
	}
	_, _ = f.Get(context.Background(), "missing")
	if f.Requests() != 1 {
		t.Fatalf("%d requests seen by the wrapper", f.Requests())
	}
	lines := runSmall(t, Config{Store: "file", Dir: t.TempDir(), StoreLatency: time.Millisecond})
	checkLines(t, lines, "file")
}

// The take-keys phase builds its table of UUID-keyed rows and takes 100
// keys it holds, 20 times, each finding its 100 rows; its line says how
// long a take took and what it read. Too few rows for 100 keys, or more
// fragments than rows, is refused before anything is written.
func TestBenchTakeKeysOnMinIO(t *testing.T) {
	srv := testenv.MinIO(t)
	lines := runSmall(t, Config{Store: "s3", S3Endpoint: srv.Endpoint, S3Bucket: srv.Bucket, Phases: []string{"take-keys"}, TakeRows: 3000, TakeFragments: 7})
	tk := lines[0]
	if tk["phase"] != "take-keys" || tk["rows"] != 3000.0 || tk["fragments"] != 7.0 || tk["keys"] != 100.0 || tk["takes"] != 20.0 {
		t.Fatalf("take-keys line %v", tk)
	}
	// A fresh snapshot a take: per fragment its footer and id chunk, or
	// the whole fragment, then the rows' spans; and the open's LIST.
	if r, _ := tk["requests"].(float64); r < 8 || r > 1+7*4 || tk["bytes_read"].(float64) <= 0 || tk["p50_ms"] == nil || tk["p99_ms"] == nil {
		t.Fatalf("take-keys line %v", tk)
	}
	// Through the key index of id: its directory read once, by the first.
	if f, _ := tk["first_requests"].(float64); f < 2 || tk["index_s"] == nil || tk["first_ms"] == nil {
		t.Fatalf("take-keys line %v", tk)
	}
	for _, bad := range []Config{{TakeRows: 99, TakeFragments: 1}, {TakeRows: 500, TakeFragments: 501}, {TakeRows: 500, TakeFragments: 0}} {
		bad.Store, bad.Dir, bad.Phases = "file", t.TempDir(), []string{"take-keys"}
		var out, log bytes.Buffer
		if err := Run(context.Background(), bad, &out, &log); err == nil || !strings.Contains(err.Error(), "take-keys needs") {
			t.Fatalf("take-keys of %d rows in %d fragments: %v", bad.TakeRows, bad.TakeFragments, err)
		}
	}
}

// A table a phase builds beside the benchmark's lies beside it, on S3
// as in a folder: the suffix goes on the path, not on the query.
func TestSideTablesLieBesideTheTable(t *testing.T) {
	for u, want := range map[string]string{
		"file:///tmp/strata-bench-1":                             "file:///tmp/strata-bench-1-take",
		"s3://b/strata-bench-x?endpoint=http%3A%2F%2Fh&region=r": "s3://b/strata-bench-x-take?endpoint=http%3A%2F%2Fh&region=r",
	} {
		if got := sideURL(u, "-take"); got != want {
			t.Errorf("beside %s: %s, want %s", u, got, want)
		}
	}
}
