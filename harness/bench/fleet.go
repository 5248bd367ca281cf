package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/job"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// The fleet mode: N shard writers append a modest rate each (one append
// of R rows every AppendEvery) for Duration, flushing every FlushInterval
// and never merging on their own; the compactor Job, in interval mode
// with a pass every MergeInterval, merges every shard's generations in
// one commit and compacts as it would deployed. At the end the writers
// flush, the Job's passes run until nothing is pending, and every
// acknowledged row must be in the table exactly once. Visibility is the
// time from an append's acknowledgement to the commit of the fleet merge
// that put its rows in the table (the manifest's time on the store).

// fleetAck is one acknowledged append of a writer.
type fleetAck struct {
	first int64 // first id
	n     int
	at    time.Time
}

func fleet(ctx context.Context, cfg Config, u string, log io.Writer) (Result, error) {
	cfg = cfg.fleetDefaults()
	admin, err := cfg.open(ctx, u)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if _, _, err := engine.Create(ctx, admin, rollouts.Schema, "bench", nil); err != nil {
		return nil, err
	}
	f := &fleetRun{cfg: cfg, u: u, log: log, admin: admin}
	// The writers open their shards before the clock starts.
	defer f.closeShards()
	if err := f.openShards(ctx); err != nil {
		return nil, err
	}
	// The Job, as deployed: an interval loop with its own bucket.
	var mergeFailures atomic.Int64
	jobLog := slog.New(&errorCounter{n: &mergeFailures, next: slog.NewTextHandler(log, &slog.HandlerOptions{Level: jobLevel()})})
	jobOpts := job.Options{Tables: []string{u}, Open: f.open, Log: jobLog, Holder: "bench-job"}
	v0, err := table.LatestVersion(ctx, admin)
	if err != nil {
		return nil, err
	}
	jobCtx, stopJob := context.WithCancel(ctx)
	defer stopJob()
	jobDone := make(chan struct{})
	before, objBefore := f.requests(), f.tally.snapshot()
	cpu0 := cpuTime()
	start := time.Now()
	go func() {
		defer close(jobDone)
		_ = job.Loop(jobCtx, &jobOpts, cfg.MergeInterval)
	}()
	fmt.Fprintf(log, "bench: %d writers append %d rows every %v for %v; the Job passes every %v\n",
		cfg.Writers, cfg.Rows, cfg.AppendEvery, cfg.Duration, cfg.MergeInterval)
	f.append(ctx, start.Add(cfg.Duration))
	wall := time.Since(start)
	runCPU := cpuTime() - cpu0
	runStats, objRun := f.requests().Sub(before), f.tally.snapshot()
	if jobLevel() == slog.LevelInfo {
		fmt.Fprintf(log, "bench: requests during the run: %+v\n", runStats)
	}
	vRun, err := table.LatestVersion(ctx, admin)
	if err != nil {
		return nil, err
	}
	failuresInRun := mergeFailures.Load() // the drain cancels a pass
	if err := f.drain(ctx, stopJob, jobDone); err != nil {
		return nil, err
	}
	c, err := f.check(ctx, v0)
	if err != nil {
		return nil, err
	}
	slices.Sort(f.ackLat)
	minutes := wall.Minutes()
	r := Result{"mode": "fleet", "writers": cfg.Writers, "duration_s": round(wall.Seconds()),
		"merge_interval_s": round(cfg.MergeInterval.Seconds()), "store_latency_ms": ms(cfg.StoreLatency),
		"rows_acked": c.acked, "rows_visible": c.visible, "rows_missing": c.missing, "rows_doubled": c.doubled,
		"append_errors": f.appendErrs.Load(), "merge_failures": failuresInRun,
		"ack_p50_ms": ms(pct(f.ackLat, 0.5)), "ack_p99_ms": ms(pct(f.ackLat, 0.99)),
		"commits_per_min": round(float64(vRun-v0) / minutes), "conflicts": f.conflicts.Load(),
		"run_cpu_s": round(runCPU.Seconds())}
	maps.Copy(r, cost(runStats, cfg.Writers, minutes, c.bytes))
	r["requests_per_shard_min_by_object"] = byObject(objRun, objBefore, cfg.Writers, minutes)
	if vis := c.visibility; len(vis) > 0 {
		r["visible_p50_s"], r["visible_p99_s"], r["visible_max_s"] = round(pct(vis, 0.5).Seconds()), round(pct(vis, 0.99).Seconds()), round(vis[len(vis)-1].Seconds())
	}
	if c.missing > 0 || c.doubled > 0 {
		return r, fmt.Errorf("%d acknowledged rows missing, %d doubled (%+v)", c.missing, c.doubled, r)
	}
	return r, nil
}

// fleetDefaults fills in the fleet mode's unset durations.
func (cfg Config) fleetDefaults() Config {
	if cfg.AppendEvery <= 0 {
		cfg.AppendEvery = time.Second
	}
	if cfg.MergeInterval <= 0 {
		cfg.MergeInterval = 5 * time.Second
	}
	if cfg.FlushInterval <= 0 {
		// A flush costs two requests (its object, and the merge's read of
		// it); one more often than the Job merges gains little, a row
		// waiting for the next pass either way. At a 5 s merge interval
		// (100 writers, 20 ms store, 2 minutes), flushes every 5 s made
		// 82.7 requests a shard-minute and rows visible in 10.5 s (p99),
		// every 6 s 79.0 and 10.7 s.
		cfg.FlushInterval = cfg.MergeInterval * 6 / 5
	}
	if cfg.Duration <= 0 {
		cfg.Duration = time.Minute
	}
	return cfg
}

// fleetRun is one run of the fleet mode.
type fleetRun struct {
	cfg   Config
	u     string
	log   io.Writer
	admin blob.Bucket

	mu        sync.Mutex
	buckets   []blob.Bucket // every bucket a process of the fleet opened, counted
	conflicts atomic.Int64
	tally     objectTally // requests by object, of every bucket opened
	shards    []*engine.DB

	acks       [][]fleetAck // by writer
	latMu      sync.Mutex
	ackLat     []time.Duration
	appendErrs atomic.Int64
}

// open opens a bucket as a process of the fleet would, counting its
// requests and lost races.
func (f *fleetRun) open(ctx context.Context, u string) (blob.Bucket, error) {
	b, err := f.cfg.open(ctx, u)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.buckets = append(f.buckets, b)
	f.mu.Unlock()
	return &fleetBucket{Bucket: b, conflicts: &f.conflicts, tally: &f.tally}, nil
}

// requests is the sum of the requests of the fleet's buckets so far.
func (f *fleetRun) requests() blob.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n blob.Stats
	for _, b := range f.buckets {
		if st, ok := blob.StatsOf(b); ok {
			n = n.Add(st)
		}
	}
	return n
}

// openShards opens each writer's shard, 64 at once.
func (f *fleetRun) openShards(ctx context.Context) error {
	cfg := f.cfg
	fmt.Fprintf(f.log, "bench: opening %d shards\n", cfg.Writers)
	f.shards = make([]*engine.DB, cfg.Writers)
	errs := make([]error, cfg.Writers)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for w := range cfg.Writers {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			b, err := f.open(ctx, f.u)
			if err == nil {
				f.shards[w], err = engine.Open(ctx, b, &engine.Options{Writer: fmt.Sprintf("w%04d", w), Log: slog.New(slog.DiscardHandler),
					Shard: engine.ShardOptions{Shard: fmt.Sprintf("w%04d", w), FlushInterval: cfg.FlushInterval}})
			}
			if err == nil {
				_, err = f.shards[w].Shard(ctx) // opened before the clock starts
			}
			errs[w] = err
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (f *fleetRun) closeShards() {
	for _, s := range f.shards {
		if s != nil {
			s.Close()
		}
	}
}

// append runs the writers until deadline, recording what each had
// acknowledged and when.
func (f *fleetRun) append(ctx context.Context, deadline time.Time) {
	cfg := f.cfg
	f.acks = make([][]fleetAck, cfg.Writers)
	var wg sync.WaitGroup
	for w := range cfg.Writers {
		wg.Go(func() {
			// Writers start spread over one interval, as a fleet would.
			time.Sleep(time.Duration(rand.Int64N(int64(cfg.AppendEvery))))
			seq := int64(0)
			t := time.NewTicker(cfg.AppendEvery)
			defer t.Stop()
			for time.Now().Before(deadline) {
				rec := rollouts.Batch(nil, cfg.Seed, w, seq, cfg.Rows)
				t0 := time.Now()
				_, err := f.shards[w].Append(ctx, engine.AppendOptions{}, rec)
				at := time.Now()
				rec.Release()
				if err != nil {
					f.appendErrs.Add(1)
				} else {
					f.acks[w] = append(f.acks[w], fleetAck{first: int64(w)*1_000_000_000 + seq, n: cfg.Rows, at: at})
					f.latMu.Lock()
					f.ackLat = append(f.ackLat, at.Sub(t0))
					f.latMu.Unlock()
				}
				seq += int64(cfg.Rows)
				select {
				case <-t.C:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	wg.Wait()
}

// drain: every writer flushes; the Job stops, and fleet merges go on
// until no generation is pending.
func (f *fleetRun) drain(ctx context.Context, stopJob func(), jobDone <-chan struct{}) error {
	fmt.Fprintf(f.log, "bench: draining\n")
	for _, s := range f.shards {
		if _, err := s.Flush(ctx); err != nil {
			return err
		}
	}
	stopJob()
	<-jobDone
	adminDB, err := engine.Open(ctx, f.admin, &engine.Options{Writer: "bench-drain", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer adminDB.Close()
	for {
		res, err := adminDB.Merge(ctx)
		if err != nil {
			return err
		}
		if res.Announced == 0 {
			return nil
		}
	}
}

// fleetCheck is what the table holds of the acknowledged rows.
type fleetCheck struct {
	acked, visible, missing, doubled int64
	visibility                       []time.Duration // ascending
	bytes                            int64           // the table's data objects
}

// check counts every acknowledged row in the table, which must hold it
// once, and how long after its acknowledgement a merge after v0 made it
// visible (the merges' times on the store).
func (f *fleetRun) check(ctx context.Context, v0 uint64) (fleetCheck, error) {
	var c fleetCheck
	visibleAt, err := mergeTimes(ctx, f.admin, v0)
	if err != nil {
		return c, err
	}
	seen := map[int64]int{}
	snap, err := table.Open(ctx, f.admin, nil)
	if err != nil {
		return c, err
	}
	c.bytes = snap.Manifest().Bytes()
	for rec, err := range snap.Scan(ctx, table.ScanOptions{Columns: []string{"id"}}) {
		if err != nil {
			return c, err
		}
		for _, id := range rec.Column(0).(*array.Int64).Int64Values() {
			seen[id]++
		}
	}
	for _, ws := range f.acks {
		for _, a := range ws {
			for id := a.first; id < a.first+int64(a.n); id++ {
				c.acked++
				switch seen[id] {
				case 0:
					c.missing++
				case 1:
				default:
					c.doubled++
				}
			}
			if t, ok := visibleAt[a.first]; ok {
				c.visibility = append(c.visibility, t.Sub(a.at))
			}
		}
	}
	for _, n := range seen {
		if n == 1 {
			c.visible++
		}
	}
	slices.Sort(c.visibility)
	return c, nil
}

// mergeTimes maps the first id of each batch that a merge after v0 put in
// the table to that merge's time on the store.
func mergeTimes(ctx context.Context, b blob.Bucket, v0 uint64) (map[int64]time.Time, error) {
	out := map[int64]time.Time{}
	for o, err := range blob.List(ctx, b, format.VersionsDir, 0) {
		if err != nil {
			return nil, err
		}
		v, ok := format.ParseManifestKey(o.Key)
		if !ok || v <= v0 {
			continue
		}
		t, err := table.ReadTransaction(ctx, b, v)
		if err != nil {
			return nil, err
		}
		if t.Kind != format.KindMerge {
			continue
		}
		frags := make([]format.Fragment, len(t.Added))
		for i, f := range t.Added {
			f.ID = uint64(i)
			frags[i] = f
		}
		snap := table.SnapshotOf(b, rollouts.Schema, frags)
		for rec, err := range snap.Scan(ctx, table.ScanOptions{Columns: []string{"id"}, Parallelism: 32}) {
			if err != nil {
				return nil, err
			}
			ids := rec.Column(0).(*array.Int64).Int64Values()
			for _, id := range ids {
				if _, ok := out[id]; !ok {
					out[id] = o.ModTime
				}
			}
		}
	}
	return out, nil
}

// errorCounter is a log handler that counts the Job's errors and passes
// its warnings and errors on.
type errorCounter struct {
	n    *atomic.Int64
	next slog.Handler
}

func (e *errorCounter) Enabled(ctx context.Context, l slog.Level) bool { return e.next.Enabled(ctx, l) }
func (e *errorCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		e.n.Add(1)
	}
	return e.next.Handle(ctx, r)
}
func (e *errorCounter) WithAttrs(a []slog.Attr) slog.Handler {
	return &errorCounter{n: e.n, next: e.next.WithAttrs(a)}
}
func (e *errorCounter) WithGroup(g string) slog.Handler {
	return &errorCounter{n: e.n, next: e.next.WithGroup(g)}
}

// cpuTime is the CPU this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// jobLevel: the Job logs warnings and errors, and everything it does with
// STRATA_BENCH_TRACE=1.
func jobLevel() slog.Level {
	if os.Getenv("STRATA_BENCH_TRACE") == "1" {
		return slog.LevelInfo
	}
	return slog.LevelWarn
}
