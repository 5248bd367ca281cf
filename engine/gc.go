package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/walshard"
)

// GCOptions shape one garbage collection.
type GCOptions struct {
	// Policy: the DB's (Options.GC) when nil.
	Policy *GCPolicy
	DryRun bool
	// Now, when set, is the collection's clock; otherwise the store's
	// (compactor.StoreClock: ages are judged by the store's modification
	// times), or the DB's for a dry run.
	Now time.Time
}

// GCPolicy is the collection policy the DB was opened with (Options.GC).
func (db *DB) GCPolicy() GCPolicy { return db.opts.GC }

// GC collects the table's garbage (compactor.GC). A failure is recorded
// in the table's history as a gc run with its duration and error, where
// operators look, and so is a collection that deleted something or that
// succeeds after a failure (clearing it).
func (db *DB) GC(ctx context.Context, o GCOptions) (GCResult, error) {
	p := db.opts.GC
	if o.Policy != nil {
		p = *o.Policy
	}
	p.DryRun = p.DryRun || o.DryRun
	start, started := time.Now(), db.opts.Now()
	res, err := db.collect(ctx, &p, o.Now)
	d := time.Since(start)
	db.opts.Listener.GCEnd(GCInfo{Table: db.opts.Name, Result: res, DryRun: p.DryRun, Duration: d, Err: err})
	if !p.DryRun {
		run := Run{Kind: compactor.KindGC, Started: started, ObjectsDeleted: len(res.ObjectsDeleted) + len(res.VersionsDeleted)}
		db.recordOutcome(ctx, run, d, err, run.ObjectsDeleted > 0)
	}
	return res, err
}

// collect is the collection proper, by the clock now (the store's when
// zero, the DB's for a dry run).
func (db *DB) collect(ctx context.Context, p *GCPolicy, now time.Time) (GCResult, error) {
	if now.IsZero() {
		now = db.opts.Now()
		if !p.DryRun {
			var err error
			if now, err = compactor.StoreClock(ctx, db.b, now); err != nil {
				return GCResult{}, fmt.Errorf("reading the store's clock: %w", err)
			}
		}
	}
	return compactor.GC(ctx, db.b, p, now)
}

// AdoptAbandoned adopts the table's shards whose owners have written
// nothing for after (by the store's clock: storeNow, read when zero) and
// that hold rows not in the
// table (walshard.FindAbandoned, walshard.Adopt), telling the listener of
// each and recording them in the history. It returns the shards adopted;
// one that cannot be adopted holds up neither the others nor the caller
// (its error is joined in the error).
//
// The sweep is recorded in the history as an adoption run, with its
// duration and error, when it adopted a shard or failed (or, finding
// nothing, when it clears an adoption failure recorded before).
func (db *DB) AdoptAbandoned(ctx context.Context, after time.Duration, storeNow time.Time) ([]string, error) {
	start, now := time.Now(), db.opts.Now()
	adopted, err := db.adoptAbandoned(ctx, after, storeNow, now)
	db.recordOutcome(ctx, Run{Kind: compactor.KindAdoption, Started: now, Adopted: adopted}, time.Since(start), err, len(adopted) > 0)
	return adopted, err
}

func (db *DB) adoptAbandoned(ctx context.Context, after time.Duration, storeNow, now time.Time) ([]string, error) {
	if storeNow.IsZero() {
		var err error
		if storeNow, err = compactor.StoreClock(ctx, db.b, now); err != nil {
			return nil, fmt.Errorf("looking for abandoned shards: reading the store's clock: %w", err)
		}
	}
	found, err := walshard.FindAbandoned(ctx, db.b, after, storeNow)
	if err != nil {
		return nil, fmt.Errorf("looking for abandoned shards: %w", err)
	}
	var adopted []string
	var errs []error
	for _, a := range found {
		if ctx.Err() != nil {
			break
		}
		_, err := db.adopt(ctx, a.Shard, AdoptOptions{}, a.LastWrite)
		if err != nil {
			errs = append(errs, fmt.Errorf("adopting shard %q: %w", a.Shard, err))
			continue
		}
		adopted = append(adopted, a.Shard)
	}
	return adopted, joinErrs(errs)
}
