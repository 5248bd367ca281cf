package engine

import (
	"context"
	"errors"
	"time"

	"github.com/stratadb/strata/walshard"
)

// Merge installs every shard's flushed generations into the manifest, in
// one commit (walshard.FleetMerge), whoever wrote them; ErrMergeRunning
// when this DB runs one already. It makes one LIST when nothing awaits.
func (db *DB) Merge(ctx context.Context) (walshard.FleetResult, error) {
	if !db.merging.CompareAndSwap(false, true) {
		return walshard.FleetResult{}, ErrMergeRunning
	}
	defer db.merging.Store(false)
	start := time.Now()
	fo := db.opts.Fleet
	if fo.Commit.Writer == "" {
		fo.Commit.Writer = db.opts.Writer + " (merge)"
	}
	res, err := walshard.FleetMerge(ctx, db.b, &fo)
	if ctx.Err() == nil && (err != nil || res.Version != 0) {
		db.opts.Listener.MergeEnd(MergeInfo{Table: db.opts.Name, Fleet: true, Result: res, Duration: time.Since(start), Err: err})
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
	} else {
		_, err = s.Merge(ctx)
	}
	if errors.Is(err, ErrMergeRunning) || errors.Is(err, walshard.ErrMergeRunning) || errors.Is(err, walshard.ErrFenced) {
		return nil
	}
	return err
}
