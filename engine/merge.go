package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
)

// Merge installs every shard's flushed generations into the manifest, in
// one commit (fleetmerge.Merge), whoever wrote them; ErrMergeRunning
// when this DB runs one already. It makes one LIST when nothing awaits.
func (db *DB) Merge(ctx context.Context) (FleetResult, error) {
	if !db.merging.CompareAndSwap(false, true) {
		return FleetResult{}, ErrMergeRunning
	}
	defer db.merging.Store(false)
	start, started := time.Now(), db.opts.Now()
	fo := db.opts.Fleet
	if fo.Memory == nil {
		fo.Memory = &db.fleet
	}
	if fo.Commit.Writer == "" {
		fo.Commit.Writer = db.opts.Writer + " (merge)"
	}
	res, err := fleetmerge.Merge(ctx, db.b, &fo)
	if db.repairedAfter(ctx, err) {
		res, err = fleetmerge.Merge(ctx, db.b, &fo)
	}
	if ctx.Err() == nil && (err != nil || res.Version != 0) {
		db.opts.Listener.MergeEnd(MergeInfo{Table: db.opts.Name, Fleet: true, Result: res, Duration: time.Since(start), Err: err})
	}
	if ctx.Err() == nil {
		db.recordOutcome(ctx, Run{Kind: compactor.KindMerge, Started: started, Version: res.Version, Generations: res.Generations},
			time.Since(start), err, false)
	}
	return res, err
}

// Merging tells whether a merge by this DB is running.
func (db *DB) Merging() bool {
	if s := db.shard.current(); s != nil && s.Merging() {
		return true
	}
	return db.merging.Load()
}

// mergeIfOwned is the background merge (Options.MergeInterval): of the
// process's shard once it is open (every shard's, with FleetMerge).
func (db *DB) mergeIfOwned(ctx context.Context) error {
	s := db.shard.current()
	if s == nil || s.Fenced() {
		return nil
	}
	var err error
	if db.opts.FleetMerge {
		_, err = db.Merge(ctx)
	} else if _, err = s.Merge(ctx); db.repairedAfter(ctx, err) {
		_, err = s.Merge(ctx)
	}
	if errors.Is(err, ErrMergeRunning) || errors.Is(err, walshard.ErrMergeRunning) || errors.Is(err, walshard.ErrFenced) {
		return nil
	}
	return err
}

// repairedAfter makes the table whole again after a merge failed on an
// object the newest version references and that is gone — a writer that
// stalled past garbage collection died before putting back what the
// collection took (a merge's deletion vector, an unacknowledged commit's
// data) — when compactor.Repair can do so without losing anything. Only
// the objects the error names are looked for (the rest are taken as
// there: no request each). It tells whether it put anything back, so that
// the merge may run again at once rather than fail until the next
// collection's repair.
func (db *DB) repairedAfter(ctx context.Context, err error) bool {
	if err == nil || !errors.Is(err, blob.ErrNotFound) && !errors.Is(err, format.ErrMissingData) || ctx.Err() != nil {
		return false
	}
	named := map[string]bool{}
	var me *format.MissingDataError
	if errors.As(err, &me) {
		for _, k := range me.Keys {
			named[k] = true
		}
	}
	var be *blob.Error
	if errors.As(err, &be) && be.Key != "" {
		named[be.Key] = true
	}
	if len(named) == 0 {
		return false
	}
	co := db.opts.Commit
	res, rerr := compactor.Repair(ctx, db.b, &co, func(key string) bool { return !named[key] })
	if rerr != nil {
		db.opts.Log.Warn("repair after a merge found an object missing failed", "table", db.opts.Name, "error", rerr.Error())
		return false
	}
	if len(res.Undone) == 0 && len(res.Rewritten) == 0 {
		return false
	}
	db.opts.Log.Warn("a merge found an object of the table missing; repaired", "table", db.opts.Name,
		"undone", fmt.Sprint(res.Undone), "rewritten", fmt.Sprint(res.Rewritten))
	return true
}

// ShardLags reads every shard's lag from the bucket (fleetmerge.Lags),
// with the states this DB's fleet merges read: the latest manifest, two
// LISTs, and a LIST of one key per shard.
func (db *DB) ShardLags(ctx context.Context) ([]ShardLag, error) {
	m, err := table.ReadLatest(ctx, db.b)
	if err != nil {
		return nil, err
	}
	mem := db.opts.Fleet.Memory
	if mem == nil {
		mem = &db.fleet
	}
	return fleetmerge.Lags(ctx, db.b, m, mem)
}
