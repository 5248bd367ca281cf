package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/rollouts"
	"github.com/stratadb/strata/job"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
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

// fleetWriter tracks one writer's acknowledgements.
type fleetAck struct {
	first int64 // first id
	n     int
	at    time.Time
}

func fleet(ctx context.Context, cfg Config, u string, log io.Writer) (Result, error) {
	if cfg.AppendEvery <= 0 {
		cfg.AppendEvery = time.Second
	}
	if cfg.MergeInterval <= 0 {
		cfg.MergeInterval = 5 * time.Second
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = cfg.MergeInterval / 2
	}
	if cfg.Duration <= 0 {
		cfg.Duration = time.Minute
	}
	admin, err := cfg.open(ctx, u)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if _, err := commit.Create(ctx, admin, rollouts.Schema, nil, nil); err != nil {
		return nil, err
	}
	// Every bucket a process of the fleet would open, counted.
	var mu sync.Mutex
	var buckets []blob.Bucket
	conflicts := &atomic.Int64{}
	open := func(ctx context.Context, u string) (blob.Bucket, error) {
		b, err := cfg.open(ctx, u)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		buckets = append(buckets, b)
		mu.Unlock()
		return &conflictCounter{Bucket: b, n: conflicts}, nil
	}
	requests := func() blob.Stats {
		mu.Lock()
		defer mu.Unlock()
		var n blob.Stats
		for _, b := range buckets {
			if st, ok := blob.StatsOf(b); ok {
				n = n.Add(st)
			}
		}
		return n
	}
	// The writers open their shards before the clock starts.
	fmt.Fprintf(log, "bench: opening %d shards\n", cfg.Writers)
	shards := make([]*engine.DB, cfg.Writers)
	errs := make([]error, cfg.Writers)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for w := range cfg.Writers {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			b, err := open(ctx, u)
			if err == nil {
				shards[w], err = engine.Open(ctx, b, &engine.Options{Writer: fmt.Sprintf("w%04d", w), Log: slog.New(slog.DiscardHandler),
					Shard: walshard.Options{Shard: fmt.Sprintf("w%04d", w), FlushInterval: cfg.FlushInterval}})
			}
			if err == nil {
				_, err = shards[w].Shard(ctx) // opened before the clock starts
			}
			errs[w] = err
		})
	}
	wg.Wait()
	defer func() {
		for _, s := range shards {
			if s != nil {
				s.Close()
			}
		}
	}()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// The Job, as deployed: an interval loop with its own bucket.
	var mergeFailures atomic.Int64
	jobLog := slog.New(&errorCounter{n: &mergeFailures, next: slog.NewTextHandler(log, &slog.HandlerOptions{Level: jobLevel()})})
	jobOpts := job.Options{Tables: []string{u}, Open: open, Log: jobLog, Holder: "bench-job"}
	v0, err := table.LatestVersion(ctx, admin)
	if err != nil {
		return nil, err
	}
	jobCtx, stopJob := context.WithCancel(ctx)
	defer stopJob()
	jobDone := make(chan struct{})
	before := requests()
	cpu0 := cpuTime()
	start := time.Now()
	go func() {
		defer close(jobDone)
		_ = job.Loop(jobCtx, &jobOpts, cfg.MergeInterval)
	}()
	fmt.Fprintf(log, "bench: %d writers append %d rows every %v for %v; the Job passes every %v\n",
		cfg.Writers, cfg.Rows, cfg.AppendEvery, cfg.Duration, cfg.MergeInterval)
	deadline := start.Add(cfg.Duration)
	acks := make([][]fleetAck, cfg.Writers)
	var ackLat []time.Duration
	var latMu sync.Mutex
	var appendErrs atomic.Int64
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
				_, err := shards[w].Append(ctx, engine.AppendOptions{}, rec)
				at := time.Now()
				rec.Release()
				if err != nil {
					appendErrs.Add(1)
				} else {
					acks[w] = append(acks[w], fleetAck{first: int64(w)*1_000_000_000 + seq, n: cfg.Rows, at: at})
					latMu.Lock()
					ackLat = append(ackLat, at.Sub(t0))
					latMu.Unlock()
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
	wall := time.Since(start)
	runCPU := cpuTime() - cpu0
	runStats := requests().Sub(before)
	runRequests := runStats.Requests()
	if jobLevel() == slog.LevelInfo {
		fmt.Fprintf(log, "bench: requests during the run: %+v\n", runStats)
	}
	vRun, err := table.LatestVersion(ctx, admin)
	if err != nil {
		return nil, err
	}
	// The drain: every writer flushes; the Job's passes go on until no
	// generation is pending.
	failuresInRun := mergeFailures.Load() // the drain cancels a pass
	fmt.Fprintf(log, "bench: draining\n")
	for _, s := range shards {
		if _, err := s.Flush(ctx); err != nil {
			return nil, err
		}
	}
	stopJob()
	<-jobDone
	adminDB, err := engine.Open(ctx, admin, &engine.Options{Writer: "bench-drain", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	defer adminDB.Close()
	for {
		res, err := adminDB.Merge(ctx)
		if err != nil {
			return nil, err
		}
		if res.Announced == 0 {
			break
		}
	}
	// Every acknowledged row once; visibility from the merges' times.
	visibleAt, err := mergeTimes(ctx, admin, v0)
	if err != nil {
		return nil, err
	}
	seen := map[int64]int{}
	snap, err := table.Open(ctx, admin, nil)
	if err != nil {
		return nil, err
	}
	for rec, err := range snap.Scan(ctx, table.ScanOptions{Columns: []string{"id"}}) {
		if err != nil {
			return nil, err
		}
		for _, id := range rec.Column(0).(*array.Int64).Int64Values() {
			seen[id]++
		}
	}
	var acked, missing, doubled int64
	var vis []time.Duration
	for _, ws := range acks {
		for _, a := range ws {
			for id := a.first; id < a.first+int64(a.n); id++ {
				acked++
				switch seen[id] {
				case 0:
					missing++
				case 1:
				default:
					doubled++
				}
			}
			if t, ok := visibleAt[a.first]; ok {
				vis = append(vis, t.Sub(a.at))
			}
		}
	}
	var visible int64
	for _, n := range seen {
		if n == 1 {
			visible++
		}
	}
	slices.Sort(ackLat)
	slices.Sort(vis)
	minutes := wall.Minutes()
	r := Result{"mode": "fleet", "writers": cfg.Writers, "duration_s": round(wall.Seconds()),
		"merge_interval_s": round(cfg.MergeInterval.Seconds()), "store_latency_ms": ms(cfg.StoreLatency),
		"rows_acked": acked, "rows_visible": visible, "rows_missing": missing, "rows_doubled": doubled,
		"append_errors": appendErrs.Load(), "merge_failures": failuresInRun,
		"ack_p50_ms": ms(pct(ackLat, 0.5)), "ack_p99_ms": ms(pct(ackLat, 0.99)),
		"commits_per_min": round(float64(vRun-v0) / minutes), "conflicts": conflicts.Load(),
		"requests_per_shard_min": round(float64(runRequests) / float64(cfg.Writers) / minutes),
		"run_cpu_s":              round(runCPU.Seconds())}
	if len(vis) > 0 {
		r["visible_p50_s"], r["visible_p99_s"], r["visible_max_s"] = round(pct(vis, 0.5).Seconds()), round(pct(vis, 0.99).Seconds()), round(vis[len(vis)-1].Seconds())
	}
	if missing > 0 || doubled > 0 {
		return r, fmt.Errorf("%d acknowledged rows missing, %d doubled (%+v)", missing, doubled, r)
	}
	return r, nil
}

// mergeTimes maps the first id of each batch that a merge after v0 put in
// the table to that merge's time on the store.
func mergeTimes(ctx context.Context, b blob.Bucket, v0 uint64) (map[int64]time.Time, error) {
	out := map[int64]time.Time{}
	for o, err := range blob.List(ctx, b, table.VersionsDir, 0) {
		if err != nil {
			return nil, err
		}
		v, ok := table.ParseManifestKey(o.Key)
		if !ok || v <= v0 {
			continue
		}
		t, err := table.ReadTransaction(ctx, b, v)
		if err != nil {
			return nil, err
		}
		if t.Kind != table.KindMerge {
			continue
		}
		frags := make([]table.Fragment, len(t.Added))
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

// conflictCounter counts the manifest creates a process lost to another.
type conflictCounter struct {
	blob.Bucket
	n *atomic.Int64
}

func (c *conflictCounter) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := c.Bucket.PutIfAbsent(ctx, key, data)
	if errors.Is(err, blob.ErrExists) && len(key) > len(table.VersionsDir) && key[:len(table.VersionsDir)] == table.VersionsDir {
		c.n.Add(1)
	}
	return err
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

// Unwrap lets blob.StatsOf reach the counted bucket underneath.
func (c *conflictCounter) Unwrap() blob.Bucket { return c.Bucket }

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
