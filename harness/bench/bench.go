// Package bench runs the rollouts workload (docs/benchmark.md) against
// Strata and prints one JSON line per phase.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// Config holds the workload's flags.
type Config struct {
	Writers, Commits, Rows int
	TargetRows             int
	Seed                   uint32
	Phases                 []string
	Store                  string // file or s3
	Dir                    string
	S3Endpoint, S3Bucket   string
	S3Prefix               string
	ConcWriters            int
	ConcCommits            int
	// Mode is "direct" (each batch one commit) or "shard" (each writer
	// appends through its own WAL shard; merges run in the background and
	// a final flush and merge is inside the timed phase).
	Mode string
	// ReuseBytes is the shard writers' engine.ShardOptions.ReuseBytes.
	ReuseBytes int64
	// Keys: the ingest writers name each append (producer "wNN", one
	// sequence number an append), as the clients do by default.
	Keys bool
	// StoreLatency delays every request by StoreLatency to 1.5× it, as a
	// remote store's round trip would (0: none). A store on the same
	// machine answers in a millisecond and shares the CPU; this shows how
	// the phases fare when the round trip, not the CPU, is the cost.
	StoreLatency time.Duration
	// TakeRows and TakeFragments shape the take-keys phase's table (see
	// takekeys.go).
	TakeRows      int64
	TakeFragments int
	// The fleet mode (see fleet.go): Writers shard writers append Rows
	// rows every AppendEvery for Duration, flushing every FlushInterval;
	// the compactor Job passes every MergeInterval.
	Duration, AppendEvery, FlushInterval, MergeInterval time.Duration
}

// open opens the bucket at u, behind the emulated round trip if any.
func (cfg Config) open(ctx context.Context, u string) (blob.Bucket, error) {
	b, err := blob.Open(ctx, u)
	if err != nil || cfg.StoreLatency <= 0 {
		return b, err
	}
	return fault.Wrap(b, fault.Latency(uint64(time.Now().UnixNano()), cfg.StoreLatency, cfg.StoreLatency*3/2)), nil
}

// AllPhases in order.
var AllPhases = []string{"ingest", "scan-before", "compact", "scan-after", "concurrent"}

// OtherPhases run only when named: take-keys builds a table of its own,
// ten million rows by default; clustered-filter gives the table the
// phases before it built (ingest, at least) a cluster key and compacts it.
var OtherPhases = []string{"take-keys", "clustered-filter"}

// Result is one output line; fields that do not apply are left out.
type Result map[string]any

// Run runs the phases, writing JSON lines to out and progress to log. It
// returns an error when a check fails.
func Run(ctx context.Context, cfg Config, out, log io.Writer) error {
	if len(cfg.Phases) == 0 {
		cfg.Phases = AllPhases
	}
	for _, p := range cfg.Phases {
		if !slices.Contains(AllPhases, p) && !slices.Contains(OtherPhases, p) {
			return fmt.Errorf("bench: unknown phase %q (phases: %s)", p, strings.Join(append(slices.Clone(AllPhases), OtherPhases...), ","))
		}
	}
	if slices.Contains(cfg.Phases, "take-keys") && (cfg.TakeRows < int64(cfg.TakeFragments) || cfg.TakeFragments < 1 || cfg.TakeRows < takeKeys) {
		return fmt.Errorf("bench: take-keys needs at least one fragment, at least %d rows and a row a fragment (%d rows in %d fragments)", takeKeys, cfg.TakeRows, cfg.TakeFragments)
	}
	tableURL, cleanup, err := cfg.tableURL()
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Fprintf(log, "bench: table %s\n", tableURL)
	enc := json.NewEncoder(out)
	if cfg.Mode == "fleet" {
		r, err := fleet(ctx, cfg, tableURL, log)
		if r != nil {
			r["system"], r["store"], r["phase"] = "strata", cfg.Store, "fleet"
			addUsage(r)
			_ = enc.Encode(r)
		}
		if err != nil {
			return fmt.Errorf("bench: fleet: %w", err)
		}
		return nil
	}
	emit := func(phase string, r Result) {
		r["system"], r["store"], r["phase"] = "strata", cfg.Store, phase
		if cfg.Mode == "shard" {
			r["mode"] = "shard"
		}
		if phase == "ingest" {
			r["keys"] = cfg.Keys
		}
		addUsage(r)
		_ = enc.Encode(r)
	}
	for _, phase := range cfg.Phases {
		fmt.Fprintf(log, "bench: phase %s\n", phase)
		// Each phase starts from a collected heap, so that the garbage of
		// the one before is not collected on its time (the LanceDB
		// benchmark runs its collector at each phase's start too).
		runtime.GC()
		var r Result
		switch phase {
		case "ingest":
			r, err = ingest(ctx, cfg, tableURL, log)
		case "scan-before", "scan-after":
			r, err = scan(ctx, cfg, tableURL)
		case "compact":
			r, err = compact(ctx, cfg, tableURL)
		case "concurrent":
			r, err = concurrent(ctx, cfg, tableURL)
		case "take-keys":
			r, err = takeKeysPhase(ctx, cfg, tableURL, log)
		case "clustered-filter":
			r, err = clusteredFilter(ctx, cfg, tableURL)
		}
		if err != nil {
			return fmt.Errorf("bench: %s: %w", phase, err)
		}
		emit(phase, r)
	}
	return nil
}

func (cfg Config) tableURL() (string, func(), error) {
	switch cfg.Store {
	case "file", "":
		dir := cfg.Dir
		cleanup := func() {}
		if dir == "" {
			d, err := os.MkdirTemp("", "strata-bench-")
			if err != nil {
				return "", nil, err
			}
			dir, cleanup = d, func() {
				// The table, and those phases build beside it (sideURL).
				side, _ := filepath.Glob(d + "-*")
				for _, p := range append(side, d) {
					os.RemoveAll(p)
				}
			}
		}
		return "file://" + dir, cleanup, nil
	case "s3":
		if cfg.S3Endpoint == "" || cfg.S3Bucket == "" {
			return "", nil, errors.New("bench: --store=s3 needs --s3-endpoint and --s3-bucket")
		}
		prefix := cfg.S3Prefix
		if prefix == "" {
			prefix = "strata-bench-" + strings.ToLower(format.NewID())
		}
		region := os.Getenv("AWS_REGION")
		if region == "" {
			region = "us-east-1"
		}
		u := fmt.Sprintf("s3://%s/%s?endpoint=%s&region=%s", cfg.S3Bucket, prefix, url.QueryEscape(cfg.S3Endpoint), region)
		return u, func() {}, nil
	}
	return "", nil, fmt.Errorf("bench: --store must be file or s3, not %q", cfg.Store)
}

// sideURL is the URL of a table a phase builds beside the one at u (the
// take-keys phase's): u with suffix added to its path, its query kept.
func sideURL(u, suffix string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u + suffix
	}
	p.Path += suffix
	return p.String()
}

// ingestWriter is one writer of the ingest phase, in a mode: it appends
// a batch (reporting the commit races it lost), then finishes.
type ingestWriter interface {
	append(ctx context.Context, rec arrow.RecordBatch) (rebases int, err error)
	finish(ctx context.Context) error
	close()
}

// directWriter commits each batch, named when names is not nil.
type directWriter struct {
	db    *engine.DB
	names *names
}

func (d directWriter) append(ctx context.Context, rec arrow.RecordBatch) (int, error) {
	var o engine.AppendOptions
	if d.names != nil {
		k := d.names.next()
		o.Key = &k
	}
	ack, err := d.db.Append(ctx, o, rec)
	return ack.Rebases, err
}
func (directWriter) finish(context.Context) error { return nil }
func (d directWriter) close()                     { d.db.Close() }

// names numbers one writer's appends (Config.Keys).
type names struct {
	producer string
	seq      uint64
}

func (n *names) next() format.Idempotency {
	n.seq++
	return format.Idempotency{Producer: n.producer, Seq: n.seq}
}

// writerNames is writer w's names, or nil without Config.Keys.
func writerNames(cfg Config, w int) *names {
	if !cfg.Keys {
		return nil
	}
	return &names{producer: fmt.Sprintf("bench-w%02d", w)}
}

// ingest runs W writers concurrently, each opening the bucket and the table
// on its own, as separate worker processes would.
func ingest(ctx context.Context, cfg Config, u string, log io.Writer) (Result, error) {
	b, err := cfg.open(ctx, u)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if _, _, err := engine.Create(ctx, b, rollouts.Schema, "bench", nil); err != nil {
		return nil, err
	}
	// Batches are generated before the clock starts.
	batches := generate(cfg, 0, cfg.Writers, cfg.Commits)
	defer release(batches)
	var mu sync.Mutex
	var lat []time.Duration
	var requests blob.Stats
	conflicts := 0
	errs := make([]error, cfg.Writers)
	// Each writer opens the bucket and the table on its own, as a worker
	// process would, before the clock starts (as the LanceDB benchmark
	// opens its writers' table handles).
	buckets := make([]blob.Bucket, cfg.Writers)
	writers := make([]ingestWriter, cfg.Writers)
	defer func() {
		for w := range cfg.Writers {
			if writers[w] != nil {
				writers[w].close()
			}
			if buckets[w] != nil {
				buckets[w].Close()
			}
		}
	}()
	for w := range cfg.Writers {
		if buckets[w], err = cfg.open(ctx, u); err != nil {
			return nil, err
		}
		if writers[w], err = openWriter(ctx, cfg, buckets[w], w); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := range cfg.Writers {
		wg.Go(func() {
			errs[w] = func() error {
				wb, wr := buckets[w], writers[w]
				for _, rec := range batches[w] {
					t0 := time.Now()
					rebases, err := wr.append(ctx, rec)
					d := time.Since(t0)
					if err != nil {
						return err
					}
					if os.Getenv("STRATA_BENCH_TRACE") != "" && d > 100*time.Millisecond {
						fmt.Fprintf(log, "bench: writer %d append took %v (%d rebases)\n", w, d, rebases)
					}
					mu.Lock()
					lat = append(lat, d)
					conflicts += rebases
					mu.Unlock()
				}
				if err := wr.finish(ctx); err != nil {
					return err
				}
				st, _ := blob.StatsOf(wb)
				mu.Lock()
				requests = addStats(requests, st)
				mu.Unlock()
				return nil
			}()
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r, err := ingestResult(ctx, b, cfg, wall, lat)
	if err != nil {
		return nil, err
	}
	r["conflicts"] = conflicts
	if os.Getenv("STRATA_BENCH_TRACE") != "" {
		fmt.Fprintf(log, "bench: requests during ingest: %+v\n", requests)
	}
	if cfg.Mode == "shard" {
		mb := float64(r["logical_bytes"].(int64)) / 1e6
		r["requests"] = requests.Requests()
		r["requests_per_mb"] = round(float64(requests.Requests()) / mb)
		r["put_requests_per_mb"] = round(float64(requests.Puts+requests.CondPutsWon+requests.CondPutsLost+requests.CondPutsErr) / mb)
		// What the store receives per logical byte: WAL entries, generations,
		// states and manifests together.
		r["store_bytes_per_logical_byte"] = round(float64(requests.BytesOut) / float64(r["logical_bytes"].(int64)))
	}
	return r, nil
}

func openWriter(ctx context.Context, cfg Config, b blob.Bucket, w int) (ingestWriter, error) {
	if cfg.Mode == "shard" {
		return openShardWriter(ctx, b, w, cfg.ReuseBytes, writerNames(cfg, w))
	}
	db, err := engine.OpenNew(b, &engine.Options{Writer: fmt.Sprintf("w%02d", w), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	return directWriter{db, writerNames(cfg, w)}, nil
}

// ingestResult checks the row count after an ingest and makes the fields
// both modes report.
func ingestResult(ctx context.Context, b blob.Bucket, cfg Config, wall time.Duration, lat []time.Duration) (Result, error) {
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		return nil, err
	}
	rows := cfg.Writers * cfg.Commits * cfg.Rows
	if got := s.Manifest().Rows(); got != int64(rows) {
		return nil, fmt.Errorf("table holds %d rows, want %d", got, rows)
	}
	slices.Sort(lat)
	logical := int64(rows) * rollouts.RowBytes
	return Result{
		"rows": rows, "logical_bytes": logical, "wall_s": round(wall.Seconds()),
		"rows_per_s": round(float64(rows) / wall.Seconds()), "mb_per_s": round(float64(logical) / 1e6 / wall.Seconds()),
		"p50_ms": ms(pct(lat, 0.50)), "p99_ms": ms(pct(lat, 0.99)), "max_ms": ms(lat[len(lat)-1]),
		"versions": s.Version(), "fragments": len(s.Manifest().Fragments),
	}, nil
}

// scan times a full scan, a projected scan and a filtered count of the
// latest version, each from the same open snapshot — as the LanceDB
// benchmark times its scans of a table it has opened — and, apart, the
// open itself (the latest version's manifest: one LIST page, one GET).
func scan(ctx context.Context, cfg Config, u string) (Result, error) {
	b, err := cfg.open(ctx, u)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	t0 := time.Now()
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		return nil, err
	}
	open := round(time.Since(t0).Seconds())
	r := Result{"open_s": open}
	// timed runs one scan and records its time, and the requests and
	// bytes it read from the store, under its name.
	timed := func(name string, fn func() (int64, error)) (int64, error) {
		before, _ := blob.StatsOf(b)
		t0 := time.Now()
		n, err := fn()
		r[name+"_s"] = round(time.Since(t0).Seconds())
		after, _ := blob.StatsOf(b)
		read := after.Sub(before)
		r[name+"_requests"], r[name+"_bytes_read"] = read.Requests(), read.BytesIn
		return n, err
	}
	scanRows := func(cols []string) func() (int64, error) {
		return func() (int64, error) {
			var n int64
			for rec, err := range s.Scan(ctx, table.ScanOptions{Columns: cols}) {
				if err != nil {
					return 0, err
				}
				n += rec.NumRows()
			}
			return n, nil
		}
	}
	nFull, err := timed("full", scanRows(nil))
	if err != nil {
		return nil, err
	}
	nProj, err := timed("proj", scanRows([]string{"id", "reward"}))
	if err != nil {
		return nil, err
	}
	nCount, err := timed("count", func() (int64, error) {
		res, err := s.Count(ctx, expr.Ge("reward", value.Float(0.9)))
		return res.Rows, err
	})
	if err != nil {
		return nil, err
	}
	if nFull != nProj {
		return nil, fmt.Errorf("full scan read %d rows, projected scan %d", nFull, nProj)
	}
	r["rows"], r["count_rows"] = nFull, nCount
	return r, nil
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return round(float64(d.Microseconds()) / 1000) }

func round(x float64) float64 {
	switch {
	case x >= 100:
		return float64(int64(x + 0.5))
	default:
		return float64(int64(x*1000+0.5)) / 1000
	}
}

// addUsage adds the process's CPU time and peak RSS so far.
func addUsage(r Result) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		r["cpu_s"] = round(cpuTime().Seconds())
		r["peak_rss_mb"] = round(float64(ru.Maxrss) / 1024)
	}
}

// generate builds the batches of workers first … first+writers-1, commits
// each, before any clock starts.
func generate(cfg Config, first, writers, commits int) [][]arrow.RecordBatch {
	batches := make([][]arrow.RecordBatch, writers)
	for i := range writers {
		for c := range commits {
			batches[i] = append(batches[i], rollouts.Batch(nil, cfg.Seed, first+i, int64(c*cfg.Rows), cfg.Rows))
		}
	}
	return batches
}

func release(batches [][]arrow.RecordBatch) {
	for _, bs := range batches {
		for _, rec := range bs {
			rec.Release()
		}
	}
}
