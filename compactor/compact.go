package compactor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// Options tune one compaction run. Zero values mean defaults.
type Options struct {
	// Commit tunes the Rewrite's commit.
	Commit commit.Options
	// Parallelism: source fragments read at once (default 64), and at
	// most ReadAheadBytes of them (default 32 MiB; a larger one alone):
	// many small fragments — a fleet's generations — are read many at once
	// from a remote store, large ones few.
	Parallelism    int
	ReadAheadBytes int64
	// MemoryBudget bounds what the run holds at once of the bins it
	// writes (default DefaultMemoryBudget, at least MinMemoryBudget): a
	// quarter of it, up to 64 MiB, for the row group being joined, and
	// the rest for the sources, each reserving before it is read what
	// reading it holds (table.CopyOptions.Memory), so fewer are read at
	// once than Parallelism when they are large. ReadAheadBytes is cut to
	// a quarter of it. A source larger than the budget is read alone, past
	// it. Result.PeakMemory tells the most the run held at once. Outside
	// it: the manifest, the Go runtime, and with Recode the writer's two
	// row groups of decoded rows.
	MemoryBudget int64
	// Recode rewrites every bin by decoding its rows and encoding them
	// again. By default a bin whose fragments qualify (no deletion
	// vector, one layout: table.CopyFragments) is merged by copying their
	// compressed pages, which spends a fraction of the CPU.
	Recode bool
	// MaxReplans bounds how often a run plans again after a Delete or
	// another Rewrite touched its fragments (default 5).
	MaxReplans int
	// A run holds the table's lease (TakeLease) as Holder (default
	// "strata-compactor") for LeaseTTL (default 30m), renewed while it
	// runs, and fails with a *LeaseHeldError when another compactor holds
	// it. Leased says the caller holds it already (the Job does).
	Holder   string
	LeaseTTL time.Duration
	Leased   bool
	// Base, when set, is the version the run plans against first: one the
	// caller read just before (to ask whether compaction is due), which
	// spares a read. A version that moved on since costs what any commit
	// racing another does: a rebase, or a plan again.
	Base *format.Manifest
	// OnProgress, when set, is told of the bytes of the source
	// fragments read so far and the plan's total, as the run reads them
	// (from 0 again when it plans again). done may pass total by the
	// footers read twice.
	OnProgress func(done, total int64)
}

// Result describes a run.
type Result struct {
	Plan            Plan
	Version         uint64 // the version holding the Rewrite (0: nothing committed)
	FragmentsBefore int
	FragmentsAfter  int
	RowsBefore      int64
	RowsAfter       int64
	BytesRewritten  int64 // bytes of the source fragments
	BinsCopied      int   // bins merged by copying their pages (the others were decoded)
	BinsSorted      int   // bins sorted by the table's cluster key
	Spills          int   // sorted runs written to the store and merged, for bins larger than one sort in memory
	PeakMemory      int64 // the most the run held at once of its memory budget (Options.MemoryBudget)
	Replans         int   // plans after the first that wrote the bins again
	Rebases         int   // plans that carried rows deleted since onto what a plan before wrote (see rebase.go)
	Duration        time.Duration
}

// ErrRowsChanged: a bin's output does not hold the bin's live rows. The
// run stops before committing.
var ErrRowsChanged = errors.New("compactor: rewritten rows differ from the source rows")

// Compact plans and runs one compaction of the table in b: each bin is
// streamed into one new fragment, and one Rewrite commits them all. When a
// Delete or another Rewrite lands on its fragments first, it plans again
// against the newer version (up to MaxReplans times) or stops with the
// conflict; appends and merges landing meanwhile are rebased over.
//
// One compactor at a time per table: the run takes the table's lease
// unless the caller holds it (Options.Leased), and fails with a
// *LeaseHeldError (errors.Is ErrLeaseHeld) when another holds it.
func Compact(ctx context.Context, b blob.Bucket, policy *Policy, opts *Options) (Result, error) {
	var res Result
	if err := policy.Validate(); err != nil {
		return res, err
	}
	if err := opts.Validate(); err != nil {
		return res, err
	}
	p, o := *policy.EnsureDefaults(), *opts.EnsureDefaults()
	if !o.Leased {
		h, err := TakePartLease(ctx, b, p.Part, o.Holder, o.LeaseTTL, time.Now())
		if err != nil {
			return res, err
		}
		// A release that fails leaves the lease to expire; it must not turn
		// a committed run into an error.
		defer func() { _ = h.Release(context.WithoutCancel(ctx)) }()
	}
	start := time.Now()
	co := o.Commit
	co.CatchUp = true
	var rewritten int64
	var n binsWritten
	var last *written // what the last plan wrote
	defer func() { last.drop(ctx, b) }()
	cres, err := commit.Drive(ctx, b, o.Base, &co, (o.MaxReplans+1)*rebasesPerPlan, func(ctx context.Context, m *format.Manifest, prev error) (commit.Plan, error) {
		if last != nil && last.lost {
			if p, ok := last.rebased(ctx, b, m); ok {
				res.Rebases++
				return p, nil
			}
			last.drop(ctx, b)
			last = nil
		}
		if prev != nil {
			if res.Replans == o.MaxReplans {
				return commit.Plan{}, &commit.BudgetError{Attempts: res.Replans + 1, Last: prev}
			}
			res.Replans++
		}
		if err := m.CheckWritable(); err != nil {
			return commit.Plan{}, err // a newer build's table: nothing is written
		}
		res.Plan = PlanCompaction(m, p)
		res.FragmentsBefore, res.RowsBefore = len(m.Fragments), m.Rows()
		res.FragmentsAfter, res.RowsAfter = res.FragmentsBefore, res.RowsBefore
		if len(res.Plan.Bins) == 0 {
			return commit.Plan{Done: true}, nil
		}
		mem := newBudget(o.MemoryBudget)
		added, rw, cp, err := writeBins(ctx, progressOf(b, res.Plan, o.OnProgress), m, res.Plan, p, o, mem)
		res.PeakMemory = max(res.PeakMemory, mem.peak())
		if errors.Is(err, blob.ErrNotFound) {
			// A source is gone: either a newer version no longer holds
			// it (this run stalled), or the newest version lost it to a
			// writer that died mid-stall, which Repair undoes. Plan anew.
			if _, rerr := Repair(ctx, b, &o.Commit, nil); rerr != nil {
				return commit.Plan{}, fmt.Errorf("%w (repairing: %w)", err, rerr)
			}
			return commit.Plan{}, fmt.Errorf("%w: %w", commit.ErrPlanAgain, err)
		}
		if err != nil {
			return commit.Plan{}, err
		}
		rewritten, n = rw, cp
		var removed []uint64
		for _, bin := range res.Plan.Bins {
			removed = append(removed, bin.Fragments...)
		}
		txn := format.Transaction{Kind: format.KindRewrite, Removed: removed, Added: added}
		if len(m.Indexes) > 0 {
			txn.Remap = remapEntries(m, res.Plan)
		}
		// A conflict means the commit is not there: its fragments are
		// never referenced, and deleted unless the next plan rebases
		// them. Any other failure may hide a create that lands later:
		// they stay for garbage collection.
		last = &written{base: m, plan: res.Plan, added: added, at: time.Now()}
		return commit.Plan{Txn: txn, Discard: last.lose(ctx, b)}, nil
	})
	res.Duration = time.Since(start)
	if err != nil || cres.Done {
		return res, err
	}
	res.Version = cres.Version
	res.FragmentsAfter, res.RowsAfter = len(cres.Manifest.Fragments), cres.Manifest.Rows()
	res.BytesRewritten, res.BinsCopied, res.BinsSorted, res.Spills = rewritten, n.copied, n.sorted, n.spills
	return res, nil
}

// binsWritten counts how the bins were written: by copying their
// pages, or sorted by the cluster key (the others were decoded).
type binsWritten struct{ copied, sorted, spills int }

// writeBins rewrites each bin: sorted by the table's cluster key when it
// has one (in fragments of the policy's target size), else into one
// fragment by copying its pages where they can be, else by decoding its
// rows.
func writeBins(ctx context.Context, b blob.Bucket, m *format.Manifest, plan Plan, p Policy, o Options, mem *budget) (added []format.Fragment, rewritten int64, n binsWritten, err error) {
	snap := table.NewSnapshot(b, m)
	key := clusterOf(m)
	for _, bin := range plan.Bins {
		var out []format.Fragment
		if key != nil {
			var spills int
			out, spills, err = sortBin(ctx, b, snap, bin, p, o, mem, key)
			n.sorted, n.spills = n.sorted+1, n.spills+spills
		} else {
			var f format.Fragment
			f, err = rewriteBin(ctx, b, snap, bin, o, mem, &n)
			out = []format.Fragment{f}
		}
		if err != nil {
			discard(ctx, b, added)
			return nil, 0, binsWritten{}, err
		}
		added = append(added, out...)
		var rows int64
		for _, f := range out {
			rows += f.Rows
		}
		if rows != bin.Rows {
			discard(ctx, b, added)
			return nil, 0, binsWritten{}, fmt.Errorf("%w: bin %v holds %d live rows, wrote %d", ErrRowsChanged, bin.Fragments, bin.Rows, rows)
		}
		rewritten += bin.Bytes
	}
	return added, rewritten, n, nil
}

// rewriteBin writes a bin by copying its pages, or, when they cannot be
// copied (or Options.Recode), by decoding its rows.
func rewriteBin(ctx context.Context, b blob.Bucket, snap *table.Snapshot, bin Bin, o Options, mem *budget, n *binsWritten) (format.Fragment, error) {
	if !o.Recode {
		f, err := copyBin(ctx, snap, bin, o, mem)
		if err == nil {
			n.copied++
		}
		if !errors.Is(err, table.ErrNotCopyable) {
			return f, err
		}
	}
	return recode(ctx, b, snap, bin, o, mem)
}

// copyBin merges a bin by copying its sources' pages, within mem: the
// row group being joined and a source opened ahead are held throughout.
func copyBin(ctx context.Context, snap *table.Snapshot, bin Bin, o Options, mem *budget) (format.Fragment, error) {
	rowGroupBytes, readAhead := copyShares(mem.size, o.ReadAheadBytes)
	release, err := mem.hold(ctx, table.CopyHoldBytes(rowGroupBytes))
	if err != nil {
		return format.Fragment{}, err
	}
	defer release()
	return snap.CopyFragments(ctx, bin.Fragments, table.CopyOptions{Parallelism: o.Parallelism, ReadAheadBytes: readAhead,
		Memory: mem, RowGroupBytes: rowGroupBytes})
}

// recodeParallelism: fragments a decoding rewrite opens ahead of their
// reservations (table.OpenAheadBytes), held besides.
const recodeParallelism = 2

// recode rewrites a bin by decoding its live rows and encoding them again.
func recode(ctx context.Context, b blob.Bucket, snap *table.Snapshot, bin Bin, o Options, mem *budget) (format.Fragment, error) {
	release, err := mem.hold(ctx, table.OpenAheadBytes(recodeParallelism))
	if err != nil {
		return format.Fragment{}, err
	}
	defer release()
	w, err := fragment.NewWriter(ctx, b, snap.Manifest().Schema())
	if err != nil {
		return format.Fragment{}, err
	}
	_, readAhead := copyShares(mem.size, o.ReadAheadBytes)
	for rec, err := range snap.Scan(ctx, table.ScanOptions{Fragments: bin.Fragments, Parallelism: recodeParallelism, ReadAheadBytes: readAhead, BatchSize: 4096, Memory: mem}) {
		if err == nil {
			err = w.Write(rec)
		}
		if err != nil {
			w.Abort()
			return format.Fragment{}, err
		}
	}
	return w.Close()
}

// discard deletes fragments no manifest references (best effort: garbage
// collection removes whatever is left), even when ctx is done — a run
// cancelled is when they most need deleting — within discardTimeout.
func discard(ctx context.Context, b blob.Bucket, frags []format.Fragment) {
	if len(frags) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardTimeout)
	defer cancel()
	for _, f := range frags {
		_ = b.Delete(ctx, f.Key)
	}
}

// discardTimeout bounds how long discard waits on the store.
const discardTimeout = 30 * time.Second

// remapEntries records where each bin's rows go: bin i becomes output i,
// its sources' live rows laid end to end in manifest order. Indexes
// translate through these entries instead of being rewritten.
func remapEntries(m *format.Manifest, plan Plan) []format.RemapEntry {
	var out []format.RemapEntry
	for i, bin := range plan.Bins {
		var base uint32
		for _, id := range bin.Fragments {
			f := m.Fragment(id)
			e := format.RemapEntry{From: id, To: uint64(i), Base: base}
			if f.Deletion != nil {
				e.Deletion = f.Deletion.Key
			}
			out = append(out, e)
			base += uint32(f.LiveRows())
		}
	}
	return out
}
