package compactor

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table/format"
)

// A compaction takes seconds to write its bins; upserts, updates and
// deletes on the rows of its sources land every few milliseconds on a
// busy table. Planning again after each (the conflict matrix's Retry of a
// Rewrite against them) would lose to the next one as surely, and the
// table would never be compacted. So a run whose commit lost only to
// deletion vectors on its sources keeps the fragments it wrote and
// carries the rows deleted since onto them, as deletion vectors of its
// own: an unsorted bin lays its sources' live rows end to end (the order
// remapEntries records), so the row o of source s, live when the bin was
// written, is row base(s) + o − (rows of s deleted before o) of the
// output. Committing that takes a read of the vectors that changed and a
// write per output, milliseconds, so the run lands between most writers'
// commits (not between those of two writers committing back to back:
// docs/operations.md).
//
// A run plans again instead when a source is gone (another Rewrite, a
// restore), a vector lost rows (an undo gave them back: the output lacks
// them), an index was created or built again (the matrix has the run
// record where the index's rows go), a bin was sorted (its order is not
// kept), or what it wrote is old enough that garbage collection may be at
// it.

// written is what one plan of a run wrote, kept for the plans after it.
type written struct {
	base  *format.Manifest // the version the bins were written from
	plan  Plan
	added []format.Fragment // as written: no deletion vectors
	at    time.Time
	// vectors: the deletion vectors the last rebase wrote for added.
	vectors []string
	// lost: its commit certainly did not land (a conflict); what it wrote
	// is deleted unless a rebase takes it on.
	lost bool
}

// rebaseMaxAge bounds the age of outputs a rebase takes on: well inside
// format.MinGCAge, before which garbage collection leaves them.
const rebaseMaxAge = format.MinGCAge / 2

// rebase plans the Rewrite of w's outputs against m, carrying the rows
// deleted from the sources since w.base (ok false: plan again).
func (w *written) rebase(ctx context.Context, b blob.Bucket, m *format.Manifest, now time.Time) (txn format.Transaction, ok bool, err error) {
	if now.Sub(w.at) > rebaseMaxAge || !slices.EqualFunc(m.Indexes, w.base.Indexes, func(a, b format.Index) bool { return a.ID == b.ID }) {
		return txn, false, nil
	}
	added := slices.Clone(w.added)
	for _, bin := range w.plan.Bins {
		if bin.Sorted {
			return txn, false, nil
		}
	}
	// Each bin's changed vectors are read, and its output's written, all
	// bins at once: the shorter the rebase, the likelier it lands before
	// the next writer's commit.
	vectors := make([]string, len(w.plan.Bins))
	var mu sync.Mutex
	planAgain := false
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(rebaseParallelism)
	for i, bin := range w.plan.Bins {
		g.Go(func() error {
			rows, ok, err := newlyDeleted(gctx, b, w.base, m, bin)
			if err != nil || !ok || len(rows) == 0 {
				mu.Lock()
				planAgain = planAgain || !ok
				mu.Unlock()
				return err
			}
			key := format.DeletionKey(0, m.Version+1) // the output's id is given when it lands
			if err := b.PutIfAbsent(gctx, key, format.EncodeDeletions(rows)); err != nil {
				return fmt.Errorf("compactor: writing the deletion vector of a rewritten fragment: %w", err)
			}
			vectors[i] = key
			added[i].Deletion = &format.Deletion{Key: key, Count: int64(len(rows))}
			return nil
		})
	}
	err = g.Wait()
	vectors = slices.DeleteFunc(vectors, func(k string) bool { return k == "" })
	if err != nil || planAgain {
		discardKeys(ctx, b, vectors)
		return txn, false, err
	}
	w.vectors = vectors
	var removed []uint64
	for _, bin := range w.plan.Bins {
		removed = append(removed, bin.Fragments...)
	}
	txn = format.Transaction{Kind: format.KindRewrite, Removed: removed, Added: added}
	if len(m.Indexes) > 0 {
		txn.Remap = remapEntries(w.base, w.plan)
	}
	return txn, true, nil
}

// newlyDeleted maps the rows of bin's sources deleted in m but not in
// base to rows of the bin's output, ascending; ok is false when a source
// is gone from m or a vector of m lacks rows base's deleted.
func newlyDeleted(ctx context.Context, b blob.Bucket, base, m *format.Manifest, bin Bin) (out []uint32, ok bool, err error) {
	var at uint32 // the output row of the source's first live row
	for _, id := range bin.Fragments {
		was, now := base.Fragment(id), m.Fragment(id)
		if was == nil || now == nil || now.Key != was.Key {
			return nil, false, nil
		}
		if !sameDeletion(was.Deletion, now.Deletion) {
			before, err := format.ReadDeletionsCached(ctx, b, was)
			if err != nil {
				return nil, false, err
			}
			after, err := format.ReadDeletionsCached(ctx, b, now)
			if err != nil {
				return nil, false, err
			}
			var ok bool
			if out, ok = mapDeleted(out, at, before, after); !ok {
				return nil, false, nil
			}
		}
		at += uint32(was.LiveRows())
	}
	return out, true, nil
}

// mapDeleted appends to out the output rows of the rows in after but not
// in before (both ascending), for a source whose first live row is output
// row at; ok is false when before holds a row after lacks.
func mapDeleted(out []uint32, at uint32, before, after []uint32) ([]uint32, bool) {
	i := 0 // before[:i] are below the row being looked at
	for _, r := range after {
		if i < len(before) && before[i] < r {
			return out, false // deleted before, live now
		}
		if i < len(before) && before[i] == r {
			i++
			continue
		}
		out = append(out, at+r-uint32(i))
	}
	return out, i == len(before)
}

func sameDeletion(a, b *format.Deletion) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Key == b.Key
}

// discardKeys deletes objects no manifest references, as discard does.
func discardKeys(ctx context.Context, b blob.Bucket, keys []string) {
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardTimeout)
	defer cancel()
	for _, k := range keys {
		_ = b.Delete(ctx, k)
	}
}

// rebaseParallelism: bins a rebase reads and writes the vectors of at
// once.
const rebaseParallelism = 16

// rebasesPerPlan bounds a run's plans: up to this many per plan that
// writes its bins (Options.MaxReplans + 1 of them), rebases included.
const rebasesPerPlan = 5

// rebased is w's rebase onto m as the next plan (ok false: plan again; a
// store error reading the vectors also plans again, reading afresh).
func (w *written) rebased(ctx context.Context, b blob.Bucket, m *format.Manifest) (commit.Plan, bool) {
	txn, ok, err := w.rebase(ctx, b, m, time.Now())
	if err != nil || !ok {
		return commit.Plan{}, false
	}
	w.lost = false
	return commit.Plan{Txn: txn, Discard: w.lose(ctx, b)}, true
}

// lose is a plan's Discard: its commit did not land, so the vectors of
// its rebase go; its outputs wait for the next plan, or drop.
func (w *written) lose(ctx context.Context, b blob.Bucket) func() {
	return func() {
		w.lost = true
		discardKeys(ctx, b, w.vectors)
		w.vectors = nil
	}
}

// drop deletes what w wrote when its last commit certainly did not land
// (nil, or one that landed or may have: nothing).
func (w *written) drop(ctx context.Context, b blob.Bucket) {
	if w == nil || !w.lost {
		return
	}
	discard(ctx, b, w.added)
	discardKeys(ctx, b, w.vectors)
	w.added, w.vectors, w.lost = nil, nil, false
}
