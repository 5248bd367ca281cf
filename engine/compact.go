package engine

import (
	"context"
	"time"

	"github.com/stratadb/strata/compactor"
)

// CompactOptions shape one compaction.
type CompactOptions struct {
	// Policy: the DB's (Options.Policy) when nil.
	Policy *Policy
	// WhenDue runs only when the policy says compaction is due (its
	// minimum of fragments, its quiet windows); otherwise a compaction
	// runs whatever the minimum, as an operator asked.
	WhenDue bool
	// DryRun plans and records nothing.
	DryRun bool
	// Holder names the lease's holder (default Options.Writer).
	// NoLease compacts without the table's lease: for a harness that races
	// compactions on purpose (correctness never depends on the lease).
	Holder  string
	NoLease bool
	// Tune is passed to the compaction (its Commit, Parallelism, Recode…;
	// its lease and dry-run fields are the DB's to set).
	Tune CompactTune
}

// Compact runs one compaction of the table under its lease, and records
// the run in the table's history — the one place a run is recorded: with
// its real duration, failed or not. A run that finds nothing to compact
// (or is not due, with WhenDue) records nothing and says why
// (CompactionInfo.Skipped). Another compactor holding the lease is
// compactor.ErrLeaseHeld, and nothing is recorded; another compaction by
// this DB, ErrCompactionRunning.
func (db *DB) Compact(ctx context.Context, o CompactOptions) (CompactionInfo, error) {
	lease, err := db.beginCompaction(ctx, o)
	if err != nil {
		return CompactionInfo{Table: db.opts.Name}, err
	}
	return db.runCompaction(ctx, o, lease)
}

// CompactInBackground takes the lease now, answering as Compact would if
// it cannot, and runs the compaction in the background (Close waits for
// it; CompactionEnd tells how it ended).
func (db *DB) CompactInBackground(ctx context.Context, o CompactOptions) error {
	lease, err := db.beginCompaction(ctx, o)
	if err != nil {
		return err
	}
	db.Go("compaction", func(ctx context.Context) error {
		_, err := db.runCompaction(ctx, o, lease)
		return err
	})
	return nil
}

// Compacting tells whether a compaction by this DB is running.
func (db *DB) Compacting() bool { return db.compacting.Load() }

// beginCompaction claims the DB's one compaction and the table's lease.
func (db *DB) beginCompaction(ctx context.Context, o CompactOptions) (*compactor.HeldLease, error) {
	if !db.compacting.CompareAndSwap(false, true) {
		return nil, ErrCompactionRunning
	}
	if o.DryRun || o.NoLease {
		return nil, nil
	}
	holder := o.Holder
	if holder == "" {
		holder = db.opts.Writer
	}
	lease, err := compactor.TakePartLease(ctx, db.b, db.opts.Policy.Part, holder, db.opts.LeaseTTL, db.opts.Now())
	if err != nil {
		db.compacting.Store(false)
		return nil, err
	}
	return lease, nil
}

// runCompaction compacts under lease (nil: a dry run, or NoLease), records the run,
// and releases both.
func (db *DB) runCompaction(ctx context.Context, o CompactOptions, lease *compactor.HeldLease) (info CompactionInfo, err error) {
	defer db.compacting.Store(false)
	if lease != nil {
		defer func() {
			if rerr := lease.Release(context.WithoutCancel(ctx)); rerr != nil {
				db.opts.Log.Warn("releasing the compaction lease failed", "table", db.opts.Name, "error", rerr.Error())
			}
		}()
	}
	info, err = db.compactLeased(ctx, o)
	db.opts.Listener.CompactionEnd(info)
	return info, err
}

// compactLeased is the compaction proper, the lease held (or a dry run).
func (db *DB) compactLeased(ctx context.Context, o CompactOptions) (CompactionInfo, error) {
	info := CompactionInfo{Table: db.opts.Name, DryRun: o.DryRun}
	p := db.opts.Policy
	if o.Policy != nil {
		p = *o.Policy
	}
	now := db.opts.Now()
	co := o.Tune
	if o.DryRun || o.WhenDue {
		// A dry run is the plan without its run; a run when due asks the
		// same question first, and plans against the version it read.
		look, err := db.PlanCompaction(ctx, &p)
		if err != nil {
			info.Err = err
			return info, err
		}
		m := look.Manifest
		if o.DryRun || !look.Due {
			info.Result = CompactResult{FragmentsBefore: len(m.Fragments), FragmentsAfter: len(m.Fragments), RowsBefore: m.Rows(), RowsAfter: m.Rows()}
			if o.DryRun {
				info.Result.Plan = look.Plan
			}
			if o.WhenDue && !look.Due {
				info.Skipped = look.Why
			}
			return info, nil
		}
		co.Base = m
	}
	co.Leased = true
	start := time.Now()
	res, err := compactor.Compact(ctx, db.b, &p, &co)
	info.Result, info.Duration, info.Err = res, time.Since(start), err
	if err == nil && res.Version == 0 {
		info.Skipped = "nothing to compact"
		return info, nil
	}
	info.Run = Run{Kind: compactor.KindCompaction, Started: now, DurationS: info.Duration.Seconds(), Version: res.Version, FragmentsBefore: res.FragmentsBefore,
		FragmentsAfter: res.FragmentsAfter, Rows: res.RowsAfter, BytesRewritten: res.BytesRewritten}
	if err != nil {
		// A failed run commits nothing to the table: its error is
		// recorded beside it.
		info.Run.Error = err.Error()
	}
	db.record(ctx, info.Run, "the compaction")
	return info, err
}
