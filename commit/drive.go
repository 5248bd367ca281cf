package commit

import (
	"context"
	"errors"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// Every write of a table — each verb of a Table, a merge of copies, a
// compaction, an undo — is a plan run by one driver (drive). The write
// says what it reads and what it would write: given the version to plan
// against, its plan function writes the objects the commit will name (a
// fragment, deletion vectors, an index) and returns the transaction, or
// Done when there is nothing to commit. The driver holds what the writes
// share: reading the version each plan is made against, committing (the
// commit loop of loop.go catches up with what landed and checks the
// conflict matrix), keeping a plan's deletion vectors through a stall past
// garbage collection, deleting what a plan wrote when its commit certainly
// did not land (when the plan says how), planning again after a conflict
// the matrix says the write must see, the pause between plans, and the
// budget of plans.

// Plan is one attempt of a write against one version.
type Plan struct {
	Txn format.Transaction
	// Done: nothing to commit; the write answers the version planned
	// against.
	Done bool
	// Discard, when set, deletes the objects the plan wrote: the driver
	// calls it when the plan's commit certainly did not land (a conflict),
	// so that nothing unreferenced waits for garbage collection.
	Discard func()

	// bodies are the deletion vectors the plan wrote, and written when it
	// began to write them: a commit that lands after a stall past garbage
	// collection points its fragments at fresh copies (keepDeletions).
	bodies  map[string][]byte
	written time.Time
}

// ErrPlanAgain, wrapped in a plan function's error, says that the version
// the plan read went out of date before it could commit (a source object
// is gone): the driver plans again against the latest version, as after a
// retryable conflict.
var ErrPlanAgain = errors.New("commit: the version planned against went out of date")

// driveOptions are how a write's plans are run.
type driveOptions struct {
	// fromHandle: the first plan is made against the version the caller
	// holds, without reading the latest; a stale one costs a plan (the
	// commit's conflict check sees what landed since), never a wrong
	// commit. Otherwise every plan reads the latest version.
	fromHandle bool
	// pause between plans (replanPause): for writes whose conflicts come
	// from writers racing over the same rows, which planning again at
	// once would race the same way.
	pause bool
	// sameCommit: every plan commits the same transaction (an append's,
	// which rebases), so a budget error names its CommitID.
	sameCommit bool
	// plans bounds the plans (default Options.MaxReplans).
	plans int
}

// planFunc plans a write against snap; prev is the error that ended the
// previous plan (nil for the first): a retryable conflict, or
// ErrPlanAgain.
type planFunc func(ctx context.Context, snap *table.Snapshot, prev error) (Plan, error)

// driver is the one loop of plans: read, plan, commit, plan again.
type driver struct {
	opts   Options
	do     driveOptions
	read   func(ctx context.Context, first bool) (*table.Snapshot, error)
	commit func(ctx context.Context, snap *table.Snapshot, p Plan) (Result, error)
}

// run runs plans until one commits, there is nothing to commit
// (Result.Done, at the version planned against), or an error that
// planning again would not cure ends it; after the budget of plans, each
// of which met a conflict, a *BudgetError wrapping the last.
func (l driver) run(ctx context.Context, planFn planFunc) (Result, error) {
	plans := l.do.plans
	if plans <= 0 {
		plans = l.opts.MaxReplans
	}
	var last error
	var commitID string
	for n := range plans {
		began := time.Now()
		snap, err := l.read(ctx, n == 0)
		if err != nil {
			return Result{}, err
		}
		p, err := planFn(ctx, snap, last)
		switch {
		case errors.Is(err, ErrPlanAgain):
			last = err
			continue
		case err != nil:
			return Result{}, err
		case p.Done:
			return Result{Version: snap.Version(), Done: true}, nil
		}
		if l.do.sameCommit {
			commitID = p.Txn.CommitID
		}
		res, err := l.commit(ctx, snap, p)
		if errors.Is(err, ErrConflict) && p.Discard != nil {
			p.Discard() // a conflict: the plan's manifest is not there
		}
		if err == nil || !IsRetryableConflict(err) || ctx.Err() != nil {
			return res, err
		}
		last = err
		if l.do.pause {
			replanPause(ctx, l.opts, n+1, time.Since(began))
		}
	}
	return Result{}, &BudgetError{CommitID: commitID, Attempts: plans, Last: last}
}

// drive runs a Table verb's plans: against the handle's version, which
// every commit moves on.
func (t *Table) drive(ctx context.Context, o driveOptions, planFn planFunc) (Result, error) {
	return driver{opts: t.opts, do: o,
		read: func(ctx context.Context, first bool) (*table.Snapshot, error) {
			if first && o.fromHandle {
				return t.Current(), nil
			}
			return t.Refresh(ctx)
		},
		commit: func(ctx context.Context, _ *table.Snapshot, p Plan) (Result, error) {
			return t.commitKeeping(ctx, p.Txn, p.bodies, p.written)
		},
	}.run(ctx, planFn)
}

// Drive runs the plans of a write of the table in b that is not a Table
// verb (a merge of copies, a compaction): the first against base (the
// latest version when nil), each next against the latest after a
// retryable conflict or ErrPlanAgain, at most plans of them (default
// opts.MaxReplans), each committed by Commit on top of the version it was
// planned against. It answers as Commit does; after the budget, a
// *BudgetError wrapping the last conflict.
func Drive(ctx context.Context, b blob.Bucket, base *format.Manifest, opts *Options, plans int, planFn func(ctx context.Context, base *format.Manifest, prev error) (Plan, error)) (Result, error) {
	o, err := opts.resolve()
	if err != nil {
		return Result{}, err
	}
	return driver{opts: o, do: driveOptions{plans: plans},
		read: func(ctx context.Context, first bool) (*table.Snapshot, error) {
			if first && base != nil {
				return table.NewSnapshot(b, base), nil
			}
			m, err := table.ReadLatest(ctx, b)
			if err != nil {
				return nil, err
			}
			return table.NewSnapshot(b, m), nil
		},
		commit: func(ctx context.Context, snap *table.Snapshot, p Plan) (Result, error) {
			return Commit(ctx, b, snap.Manifest(), p.Txn, opts)
		},
	}.run(ctx, func(ctx context.Context, snap *table.Snapshot, prev error) (Plan, error) {
		return planFn(ctx, snap.Manifest(), prev)
	})
}
