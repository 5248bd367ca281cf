// Package job is the singleton compactor Job (strata-compactor): passes
// over many tables, each a maintenance pass of the table's engine handle
// (engine.DB.Maintain) — merge every shard's flushed generations, adopt
// abandoned shards, compact when due, export the Iceberg view, collect
// garbage — once, or every interval with merges beside the passes.
package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
)

// Options configure the Job. Zero values mean defaults.
type Options struct {
	Tables []string // table URLs
	// Under are bucket URLs whose tables, at any depth, are served too
	// (engine.DiscoverTables): RunOnce finds them once, Loop again
	// every Rediscover (default DefaultRediscover; every pass while it
	// finds none), so a table created after the Job started is merged,
	// adopted, compacted and collected.
	Under      []string
	Rediscover time.Duration
	Policy     engine.Policy
	GC         engine.GCPolicy
	NoGC       bool
	// Iceberg keeps each table's Iceberg view up to date with Export
	// (engine/iceberg.ExportKept, which the Job's program passes; the
	// package links the Iceberg writer): every pass exports the versions GC
	// keeps, before collecting.
	Iceberg  bool
	Export   engine.IcebergExport
	LeaseTTL time.Duration // default 30m
	Holder   string        // who holds the lease (default: "strata-compactor")
	DryRun   bool
	// History is how many run records to keep per table (default 100).
	History int
	// MemoryBudget bounds what a table's compaction holds at once
	// (engine.CompactTune.MemoryBudget; default
	// engine.DefaultMemoryBudget), and a merge's (Fleet.MemoryBudget,
	// unless set). Tables are compacted and merged one at a time.
	MemoryBudget int64
	// NoMerge skips the merge of every shard's flushed generations each
	// pass runs first (engine.DB.Merge); Fleet tunes it.
	NoMerge bool
	Fleet   engine.FleetOptions
	// AdoptAfter: a shard whose owner has written nothing for this long
	// and that holds rows not in the table is adopted (engine.DB.Adopt);
	// default 15m, negative never. Interval passes look for such shards
	// every AdoptAfter/3.
	AdoptAfter time.Duration
	Log        *slog.Logger
	Open       func(ctx context.Context, url string) (blob.Bucket, error) // default blob.Open
	Now        func() time.Time                                           // default time.Now
	// OnPass, when set, is told of every pass (what it did, how long it
	// took); Listener of what each table's handle did (merges,
	// compactions, collections, adoptions): metrics hang here.
	OnPass   func(sum Summary, d time.Duration)
	Listener engine.EventListener
}

// TableOutcome is what one pass did to one table.
type TableOutcome struct {
	Table string
	engine.PassOutcome
	// Lags is every shard's lag as the pass read it (engine.DB.ShardLags),
	// at most once every lagsEvery for a table of Loop; nil when not read.
	Lags []engine.ShardLag
}

// lagsEvery: how often Loop's passes read a table's shards' lags (a LIST
// of one key per shard).
const lagsEvery = time.Minute

// Summary is one pass over every table.
type Summary struct {
	Tables, Compacted, Skipped, Failed int
	FragmentsBefore, FragmentsAfter    int
	VersionsDeleted, ObjectsDeleted    int
	Merged, Adopted, Idle              int
	Outcomes                           []TableOutcome
}

// RunOnce makes one pass: for each table, take the lease, merge, adopt,
// compact if due, record the run, collect garbage, and release the lease.
// A table whose lease another Job holds is skipped, not failed. The error
// joins the tables' failures.
func RunOnce(ctx context.Context, opts *Options) (Summary, error) {
	if err := opts.Validate(); err != nil {
		return Summary{}, err
	}
	j := newRunner(*opts.EnsureDefaults(), false)
	defer j.close()
	return j.timedPass(ctx)
}

// Loop runs a pass every interval until ctx ends; failures are logged and
// the next pass goes on. Merges run beside the passes, every interval too,
// so that a long compaction does not hold them up. It keeps each table's
// handle open and remembers what it saw, so that an interval over a table
// where nothing happened (no new version, no generation announced, no
// collection or adoption sweep due) costs two requests: the merge's LIST
// of announcements and the pass's LIST of versions.
func Loop(ctx context.Context, opts *Options, interval time.Duration) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	o := *opts.EnsureDefaults()
	j := newRunner(o, true)
	defer j.close()
	// Merges run on their own, every interval, so that a fleet's flushed
	// generations wait one interval at most for their merge however long
	// a compaction or a collection takes: an append never conflicts with a
	// compaction, and a merge needs no lease.
	_ = j.discover(ctx) // the merges' tables; a failure is the first pass's to log
	var merger sync.WaitGroup
	defer merger.Wait()
	if !o.NoMerge && !o.DryRun && !o.compactsOnly() {
		merger.Go(func() { j.mergeLoop(ctx, interval) })
		j.o.NoMerge = true
	}
	// Passes start every interval (a pass that runs longer is followed at
	// once by the next).
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := j.timedPass(ctx); err != nil {
			o.Log.Error("pass failed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// runner holds the tables' handles across passes (kept open by Loop).
type runner struct {
	o    Options
	keep bool
	mu   sync.Mutex
	dbs  map[string]*engine.DB
	// lagsAt: when each table's lags were last read (Loop).
	lagsAt map[string]time.Time
	found  struct {
		mu   sync.Mutex
		urls []string  // the tables last found under Options.Under
		at   time.Time // when
	}
}

func newRunner(o Options, keep bool) *runner {
	return &runner{o: o, keep: keep, dbs: map[string]*engine.DB{}, lagsAt: map[string]time.Time{}}
}

// db returns the handle of table u, opening it (and, unless kept, the
// caller closes it with done).
func (j *runner) db(ctx context.Context, u string) (db *engine.DB, done func(), err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if db := j.dbs[u]; db != nil {
		return db, func() {}, nil
	}
	b, err := j.o.Open(ctx, u)
	if err != nil {
		return nil, nil, err
	}
	fleet := j.o.Fleet
	db, err = engine.Open(ctx, b, &engine.Options{Name: u, Writer: j.o.Holder, Policy: j.o.Policy, GC: j.o.GC,
		LeaseTTL: j.o.LeaseTTL, History: j.o.History, Fleet: fleet, Listener: j.o.Listener, Log: j.o.Log, Now: j.o.Now, CloseBucket: true})
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	if !j.keep {
		return db, func() { db.Close() }, nil
	}
	j.dbs[u] = db
	return db, func() {}, nil
}

func (j *runner) close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	for u, db := range j.dbs {
		if err := db.Close(); err != nil {
			j.o.Log.Warn("closing a table's handle", "table", u, "error", err.Error())
		}
	}
}

// timedPass runs a pass and tells OnPass.
func (j *runner) timedPass(ctx context.Context) (Summary, error) {
	start := time.Now()
	sum, err := j.pass(ctx)
	if j.o.OnPass != nil {
		j.o.OnPass(sum, time.Since(start))
	}
	return sum, err
}

func (j *runner) pass(ctx context.Context) (Summary, error) {
	var sum Summary
	var errs []error
	if out := j.discover(ctx); out != nil {
		// A failed table of the pass, named by its bucket URL: the
		// failures' metrics and alerts see a Job that cannot list.
		j.o.Log.Error("listing tables failed", "under", out.Table, "error", out.Err.Error())
		sum.add(*out)
		errs = append(errs, out.Err)
	}
	for _, u := range j.tables() {
		out := j.table(ctx, u)
		sum.add(out)
		if out.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u, out.Err))
		}
	}
	j.o.Log.Info("summary", "tables", sum.Tables, "compacted", sum.Compacted, "skipped", sum.Skipped, "failed", sum.Failed,
		"fragments_before", sum.FragmentsBefore, "fragments_after", sum.FragmentsAfter,
		"versions_deleted", sum.VersionsDeleted, "objects_deleted", sum.ObjectsDeleted,
		"generations_merged", sum.Merged, "shards_adopted", sum.Adopted, "idle", sum.Idle)
	return sum, errors.Join(errs...)
}

// table makes the pass over table u.
func (j *runner) table(ctx context.Context, u string) TableOutcome {
	db, done, err := j.db(ctx, u)
	if err != nil {
		j.o.Log.Error("open failed", "table", u, "error", err.Error())
		return TableOutcome{Table: u, PassOutcome: engine.PassOutcome{Err: err}}
	}
	defer done()
	mo := engine.MaintainOptions{DryRun: j.o.DryRun, NoMerge: j.o.NoMerge, NoGC: j.o.NoGC, Remember: j.keep, Holder: j.o.Holder,
		Tune: engine.CompactTune{MemoryBudget: j.o.MemoryBudget}}
	if j.o.AdoptAfter > 0 {
		mo.AdoptAfter = j.o.AdoptAfter
	}
	if j.o.compactsOnly() {
		mo.NoMerge, mo.NoGC, mo.AdoptAfter = true, true, 0
		return TableOutcome{Table: u, PassOutcome: db.Maintain(ctx, mo)}
	}
	if j.o.Iceberg {
		loc, err := engine.IcebergLocation(u)
		if err != nil {
			return TableOutcome{Table: u, PassOutcome: engine.PassOutcome{Err: err}}
		}
		mo.IcebergLocation, mo.IcebergExport = loc, j.o.Export
	}
	return j.withLags(ctx, u, db, TableOutcome{Table: u, PassOutcome: db.Maintain(ctx, mo)})
}

// withLags adds the shards' lags to out when they are due: every pass of
// RunOnce, once every lagsEvery in Loop. A failure to read them is
// logged, and fails nothing.
func (j *runner) withLags(ctx context.Context, u string, db *engine.DB, out TableOutcome) TableOutcome {
	if j.o.DryRun || ctx.Err() != nil {
		return out
	}
	j.mu.Lock()
	due := time.Since(j.lagsAt[u]) >= lagsEvery || !j.keep
	if due {
		j.lagsAt[u] = time.Now()
	}
	j.mu.Unlock()
	if !due {
		return out
	}
	lags, err := db.ShardLags(ctx)
	if err != nil {
		j.o.Log.Warn("reading the shards' lags failed", "table", u, "error", err.Error())
		return out
	}
	out.Lags = lags
	return out
}

func (s *Summary) add(out TableOutcome) {
	s.Outcomes = append(s.Outcomes, out)
	s.Tables++
	s.FragmentsBefore += out.FragmentsBefore
	s.FragmentsAfter += out.FragmentsAfter
	s.VersionsDeleted += out.VersionsDeleted
	s.ObjectsDeleted += out.ObjectsDeleted
	s.Merged += out.Merged
	s.Adopted += len(out.Adopted)
	if out.Idle {
		s.Idle++
	}
	switch {
	case out.Err != nil:
		s.Failed++
	case out.Compacted:
		s.Compacted++
	case out.Skipped != "":
		s.Skipped++
	}
}

// mergeLoop merges every table every interval until ctx ends. A table
// with nothing announced costs one LIST.
func (j *runner) mergeLoop(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, u := range j.tables() {
			if ctx.Err() != nil {
				return
			}
			db, done, err := j.db(ctx, u)
			if err != nil {
				j.o.Log.Error("open failed", "table", u, "error", err.Error())
				continue
			}
			_, _ = db.Merge(ctx) // told to the listener
			done()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
