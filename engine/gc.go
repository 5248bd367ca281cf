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
	Policy *compactor.GCPolicy
	DryRun bool
	// Now, when set, is the collection's clock; otherwise the store's
	// (compactor.StoreClock: ages are judged by the store's modification
	// times), or the DB's for a dry run.
	Now time.Time
}

// GC collects the table's garbage (compactor.GC). A failure is recorded
// in the table's history (its last_error), where operators look.
func (db *DB) GC(ctx context.Context, o GCOptions) (compactor.GCResult, error) {
	p := db.opts.GC
	if o.Policy != nil {
		p = *o.Policy
	}
	p.DryRun = p.DryRun || o.DryRun
	start := time.Now()
	now := o.Now
	if now.IsZero() {
		now = db.opts.Now()
		if !p.DryRun {
			var err error
			if now, err = compactor.StoreClock(ctx, db.b, now); err != nil {
				err = fmt.Errorf("reading the store's clock: %w", err)
				db.opts.Listener.GCEnd(GCInfo{Table: db.opts.Name, DryRun: p.DryRun, Duration: time.Since(start), Err: err})
				return compactor.GCResult{}, err
			}
		}
	}
	res, err := compactor.GC(ctx, db.b, &p, now)
	db.opts.Listener.GCEnd(GCInfo{Table: db.opts.Name, Result: res, DryRun: p.DryRun, Duration: time.Since(start), Err: err})
	if err != nil && !p.DryRun {
		db.record(ctx, compactor.Run{Started: db.opts.Now(), Error: "gc: " + err.Error()}, "the collection's failure")
	}
	return res, err
}

// AdoptAbandoned adopts the table's shards whose owners have written
// nothing for after (by the store's clock: storeNow, read when zero) and
// that hold rows not in the
// table (walshard.FindAbandoned, walshard.Adopt), telling the listener of
// each and recording them in the history. It returns the shards adopted;
// one that cannot be adopted holds up neither the others nor the caller
// (its error is joined in the error).
func (db *DB) AdoptAbandoned(ctx context.Context, after time.Duration, storeNow time.Time) ([]string, error) {
	now := db.opts.Now()
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
	err = joinErrs(errs)
	if len(adopted) > 0 || err != nil {
		// Records sort by start time, and a pass's compaction records one
		// at its start after this: this one goes just before it, so that
		// the compaction's is the newest and carries both forward.
		run := compactor.Run{Started: now.Add(-time.Nanosecond), Adopted: adopted}
		if err != nil {
			run.Error = "adopt: " + err.Error()
		}
		db.record(ctx, run, "the adoptions")
	}
	return adopted, err
}
