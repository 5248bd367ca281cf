package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table"
)

// MaintainOptions shape a maintenance pass (the compactor Job's, per
// table).
type MaintainOptions struct {
	DryRun bool
	// NoMerge skips the pass's merge of every shard's generations (an
	// interval Job runs its merges on their own); NoGC its collection.
	NoMerge, NoGC bool
	// AdoptAfter: shards quiet this long that hold rows not in the table
	// are adopted (0: never).
	AdoptAfter time.Duration
	// IcebergLocation, when set, keeps the table's Iceberg view up to
	// date there with IcebergExport (the Job's program passes
	// engine/iceberg's ExportKept; the engine links no Iceberg writer):
	// every pass exports the versions the collection keeps, before
	// collecting.
	IcebergLocation string
	IcebergExport   IcebergExport
	// Remember makes the DB remember what the pass saw, so that the next
	// pass over a table where nothing happened costs two requests (and
	// collections and adoption sweeps run at their own pace, not every
	// pass): interval passes.
	Remember bool
	// Holder names the lease's holder (default Options.Writer).
	Holder string
	// Tune is passed to the pass's compaction (its MemoryBudget, say), as
	// CompactOptions.Tune is.
	Tune CompactTune
}

// PassOutcome is what one maintenance pass did to the table.
type PassOutcome struct {
	Skipped         string // why no compaction ran (lease held, not due)
	Compacted       bool
	FragmentsBefore int
	FragmentsAfter  int
	VersionsDeleted int
	ObjectsDeleted  int
	BytesFreed      int64
	// Merged: generations the pass's merge installed, from MergedShards
	// shards. Adopted: shards it adopted.
	Merged       int
	MergedShards int
	Adopted      []string
	// Iceberg is the newest Iceberg metadata's location, when the pass
	// exported.
	Iceberg string
	// Idle: nothing had changed since the last remembered pass, so it
	// looked (two requests) and did nothing.
	Idle bool
	Err  error
}

// remembered is what passes remember of the table (MaintainOptions.Remember).
type remembered struct {
	seen    bool
	version uint64    // the newest version the last full pass left
	gcAt    time.Time // when the last collection ran
	sweptAt time.Time // when abandoned shards were last looked for
}

// gcEvery: how often remembered passes collect garbage (a collection
// lists every object of the table, and what it may delete only ages
// slowly).
func (db *DB) gcEvery() time.Duration {
	return max(db.opts.GC.EnsureDefaults().RetainFor, compactor.MinRetain) / 4
}

// Maintain makes one maintenance pass over the table, as the compactor
// Job does: under the table's lease, merge every shard's flushed
// generations, adopt abandoned shards, compact when the policy says it is
// due, bring the Iceberg view up to date, and collect garbage. A lease
// held by another compactor skips the pass (Skipped), not fails it.
func (db *DB) Maintain(ctx context.Context, o MaintainOptions) (out PassOutcome) {
	if o.Remember && db.idle(ctx, o) {
		return PassOutcome{Idle: true, Skipped: "nothing changed since the last pass"}
	}
	now := db.opts.Now()
	if o.Remember {
		// A pass that compacted is not remembered as seen: a run is
		// bounded (MaxSourceFragments, MaxSourceBytes), and the next pass
		// must plan again rather than find its own commit and call the
		// table idle while bins remain.
		defer func() {
			db.mu.Lock()
			defer db.mu.Unlock()
			if out.Compacted {
				db.mu.pass.seen = false
			} else if out.Err == nil {
				if v, err := table.LatestVersion(context.WithoutCancel(ctx), db.b); err == nil {
					db.mu.pass.version, db.mu.pass.seen = v, true
				}
			}
		}()
	}
	holder := o.Holder
	if holder == "" {
		holder = db.opts.Writer
	}
	if !db.compacting.CompareAndSwap(false, true) {
		return PassOutcome{Skipped: ErrCompactionRunning.Error()}
	}
	defer db.compacting.Store(false)
	if !o.DryRun {
		lease, err := compactor.TakePartLease(ctx, db.b, db.opts.Policy.Part, holder, db.opts.LeaseTTL, now)
		if errors.Is(err, compactor.ErrLeaseHeld) {
			db.opts.Log.Info("skipped", "table", db.opts.Name, "reason", err.Error())
			return PassOutcome{Skipped: err.Error()}
		}
		if err != nil {
			return PassOutcome{Err: err}
		}
		defer func() {
			if err := lease.Release(context.WithoutCancel(ctx)); err != nil {
				db.opts.Log.Warn("lease release failed", "table", db.opts.Name, "error", err.Error())
			}
		}()
	}
	db.maintainLeased(ctx, o, now, &out)
	return out
}

// maintainLeased is the pass, the lease held.
func (db *DB) maintainLeased(ctx context.Context, o MaintainOptions, now time.Time, out *PassOutcome) {
	if !o.NoMerge && !o.DryRun {
		res, err := db.Merge(ctx)
		out.Merged, out.MergedShards = res.Generations, res.Shards
		if err != nil && !errors.Is(err, ErrMergeRunning) {
			out.Err = err
			return
		}
	}
	// The store's clock, read once a pass and only for the steps that
	// judge ages by the store's modification times.
	var storeNow time.Time
	storeClock := func() (time.Time, error) {
		if storeNow.IsZero() {
			t, err := compactor.StoreClock(ctx, db.b, now)
			if err != nil {
				return now, fmt.Errorf("reading the store's clock: %w", err)
			}
			storeNow = t
		}
		return storeNow, nil
	}
	var adoptErr error
	if o.AdoptAfter > 0 && !o.DryRun && db.due(o.Remember, func(r *remembered) time.Time { return r.sweptAt }, o.AdoptAfter/3) {
		// A shard that cannot be adopted (its WAL damaged) holds up neither
		// the others nor the rest of the pass; its error is the pass's
		// unless a later step fails.
		t, err := storeClock()
		if err == nil {
			out.Adopted, err = db.AdoptAbandoned(ctx, o.AdoptAfter, t)
		}
		adoptErr = err
		db.remember(o.Remember, func(r *remembered) { r.sweptAt = now })
	}
	defer func() {
		if out.Err == nil {
			out.Err = adoptErr
		}
	}()
	info, err := db.compactLeased(ctx, CompactOptions{WhenDue: true, DryRun: o.DryRun, Tune: o.Tune})
	out.FragmentsBefore, out.FragmentsAfter = info.Result.FragmentsBefore, info.Result.FragmentsAfter
	out.Skipped, out.Compacted = info.Skipped, err == nil && info.Result.Version != 0
	if info.Skipped == "" || err != nil {
		db.opts.Listener.CompactionEnd(info)
	} else {
		db.opts.Log.Info("compaction not due", "table", db.opts.Name, "reason", info.Skipped, "fragments", info.Result.FragmentsBefore)
	}
	if err != nil {
		out.Err = err
		return
	}
	if o.IcebergLocation != "" && !o.DryRun {
		if out.Iceberg, err = db.exportIceberg(ctx, o.IcebergExport, o.IcebergLocation, now); err != nil {
			out.Err = err
			return
		}
	}
	if o.NoGC || !db.due(o.Remember, func(r *remembered) time.Time { return r.gcAt }, db.gcEvery()) {
		return
	}
	gcNow := now
	if !o.DryRun {
		if gcNow, err = storeClock(); err != nil {
			out.Err = err
			return
		}
	}
	res, err := db.GC(ctx, GCOptions{DryRun: o.DryRun, Now: gcNow})
	db.remember(o.Remember, func(r *remembered) { r.gcAt = now })
	out.VersionsDeleted, out.ObjectsDeleted, out.BytesFreed = len(res.VersionsDeleted), len(res.ObjectsDeleted), res.BytesFreed
	if err != nil {
		out.Err = err
	}
}

// due tells whether a remembered step last run at at(r) is due again
// after every (always, when passes do not remember).
func (db *DB) due(remember bool, at func(*remembered) time.Time, every time.Duration) bool {
	if !remember {
		return true
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.opts.Now().Sub(at(&db.mu.pass)) >= every
}

func (db *DB) remember(remember bool, set func(*remembered)) {
	if remember {
		db.mu.Lock()
		set(&db.mu.pass)
		db.mu.Unlock()
	}
}

// idle tells whether nothing happened to the table since the last
// remembered pass: one LIST for the newest version, one for announced
// generations, and one page per thousand shards for flush objects.
func (db *DB) idle(ctx context.Context, o MaintainOptions) bool {
	db.mu.Lock()
	r := db.mu.pass
	db.mu.Unlock()
	now := db.opts.Now()
	if !r.seen || (!o.NoGC && now.Sub(r.gcAt) >= db.gcEvery()) || (o.AdoptAfter > 0 && now.Sub(r.sweptAt) >= o.AdoptAfter/3) {
		return false
	}
	v, err := table.LatestVersion(ctx, db.b)
	if err != nil || v != r.version {
		return false
	}
	if !o.NoMerge {
		if quiet, err := db.fleet.Idle(ctx, db.b, now); err != nil || !quiet {
			return false
		}
	}
	return true
}

// IcebergExport brings a table's Iceberg view at loc up to date,
// describing the versions a collection under gc keeps: package
// engine/iceberg's ExportKept, or a harness's stand-in.
type IcebergExport func(ctx context.Context, b blob.Bucket, loc string, gc GCPolicy, now time.Time) (IcebergOutcome, error)

// IcebergOutcome is what an export did.
type IcebergOutcome struct {
	MetadataLocation string // the newest metadata's full address
	Written          bool   // this export wrote it (false: nothing new)
	Current          uint64 // the version of the main branch
	Snapshots        int    // the versions described
	Added, Dropped   int    // snapshots this export added and dropped
}

// exportIceberg brings the table's Iceberg view at loc up to date,
// describing the versions the collection keeps (the same policy), so that
// the collection right after it may take the versions that aged out. A
// failed export is recorded in the table's history as an export run, and
// so is the next one that succeeds (clearing it).
func (db *DB) exportIceberg(ctx context.Context, export IcebergExport, loc string, now time.Time) (string, error) {
	if export == nil {
		return "", fmt.Errorf("%w: an Iceberg location without MaintainOptions.IcebergExport (engine/iceberg.ExportKept)", ErrInvalidOptions)
	}
	start, started := time.Now(), db.opts.Now()
	res, err := export(ctx, db.b, loc, *db.opts.GC.EnsureDefaults(), now)
	db.recordOutcome(ctx, Run{Kind: compactor.KindExport, Started: started, Version: res.Current}, time.Since(start), err, false)
	if err != nil {
		db.opts.Log.Error("iceberg export failed", "table", db.opts.Name, "error", err.Error())
		return "", fmt.Errorf("iceberg export: %w", err)
	}
	db.opts.Log.Info("iceberg", "table", db.opts.Name, "metadata", res.MetadataLocation, "written", res.Written, "current", res.Current,
		"snapshots", res.Snapshots, "added", res.Added, "dropped", res.Dropped)
	return res.MetadataLocation, nil
}
