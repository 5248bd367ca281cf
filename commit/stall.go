package commit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// finish reports success, unless the commit stalled for so long that the
// garbage collector may have removed what it relied on:
//
//   - the version it created (then the manifest is a resurrected,
//     unreachable one: it is deleted), checked when the commit took longer
//     than StallCheck from reading its base (see resurrected);
//   - a fragment it adds, checked when that fragment is older than
//     MinGCAge less a margin (GC deletes unreferenced objects only once
//     older than MinGCAge). A fragment lost before the create landed is
//     removed again by a Rewrite (Undo), so the table stays readable; the
//     commit was not acknowledged, and its caller writes the data again
//     (see lostFragments for a fragment gone after the create landed).
//
// Every request here retries transient errors: giving up would leave the
// outcome unknown, or the table referencing data that is gone.
func finish(ctx context.Context, b blob.Bucket, txn *format.Transaction, m *format.Manifest, res Result, readAt time.Time, o Options) (Result, error) {
	if o.Now().Sub(readAt) > o.StallCheck {
		var why string
		err := retryTransient(ctx, o, func() (err error) { why, err = resurrected(ctx, b, m.Version); return err })
		if err != nil {
			return Result{}, fmt.Errorf("commit %s: checking for a collected version after a stall: %w", txn.CommitID, err)
		}
		if why != "" {
			err := retryTransient(ctx, o, func() error {
				err := b.Delete(ctx, format.ManifestKey(m.Version))
				if errors.Is(err, blob.ErrNotFound) {
					return nil
				}
				return err
			})
			if err != nil {
				return Result{}, fmt.Errorf("commit %s: v%d had been collected (%s), and deleting it again failed: %w", txn.CommitID, m.Version, why, err)
			}
			return Result{}, &ConflictError{Ours: *txn, Version: m.Version, Retryable: true,
				Reason: fmt.Sprintf("stalled past garbage collection: v%d had been collected (%s)", m.Version, why)}
		}
	}
	var lost []uint64
	var undone uint64
	err := retryTransient(ctx, o, func() (err error) { lost, undone, err = lostFragments(ctx, b, m, o); return err })
	if err != nil {
		return Result{}, fmt.Errorf("commit %s: checking its fragments after a stall: %w", txn.CommitID, err)
	}
	if undone > 0 {
		return Result{}, &ConflictError{Ours: *txn, Version: m.Version, Retryable: true, LostData: true,
			Reason: fmt.Sprintf("stalled past garbage collection: fragments were deleted before v%d landed, and a repair undid it at v%d; write the data anew", m.Version, undone)}
	}
	if len(lost) > 0 {
		if err := Undo(ctx, b, m, &o); err != nil {
			return Result{}, fmt.Errorf("commit %s: v%d references fragments %v that garbage collection deleted during a stall, and undoing it failed: %w", txn.CommitID, m.Version, lost, err)
		}
		return Result{}, &ConflictError{Ours: *txn, Version: m.Version, Retryable: true, LostData: true,
			Reason: fmt.Sprintf("stalled past garbage collection: fragments %v were deleted before v%d landed; the commit was undone, write the data anew", lost, m.Version)}
	}
	res.Version, res.Manifest = m.Version, m
	return res, nil
}

// goneOrDoomed returns which of keys (objects a commit added) are gone, or
// listed in an orphan record — a collection that listed one before the
// commit landed may yet delete it, and the commit must not stand (see
// format.OrphanRecord). Each object is looked for first; records made
// before an object was uploaded cannot name it, and both times are the
// store's (the object's and the records' modification times), so that a
// writer whose clock runs ahead of the store's skips none. The margin
// covers a store whose nodes' clocks disagree a little.
func goneOrDoomed(ctx context.Context, b blob.Bucket, keys []string) (map[string]bool, error) {
	gone := map[string]bool{}
	var since time.Time
	for _, k := range keys {
		attrs, err := b.Attributes(ctx, k)
		switch {
		case errors.Is(err, blob.ErrNotFound):
			gone[k] = true
		case err != nil:
			return nil, err
		case since.IsZero() || attrs.ModTime.Before(since):
			since = attrs.ModTime
		}
	}
	if since.IsZero() { // none is there
		return gone, nil
	}
	records, err := format.OrphanRecords(ctx, b, since.Add(-format.MinGCAge))
	if err != nil {
		return nil, err
	}
	for _, r := range records {
		for _, k := range r.Keys {
			if slices.Contains(keys, k) {
				gone[k] = true
			}
		}
	}
	return gone, nil
}

// lostFragments finds out what became of the fragments the commit that
// made m added, when they are old enough for GC to have taken them and
// are gone. A fragment the newest version still references was taken
// before m landed: it is returned as lost, and the commit must be undone.
// One a later version removed was either folded into a compaction's output
// after m landed (its rows live on: fine), or taken out by a repair that
// undid m (compactor.Repair, when this writer seemed dead): then undone
// is that version. If the versions that would tell were collected, the
// outcome cannot be known, and that is the error. Merged shard
// generations are exempt: GC never deletes a generation above its shard's
// watermark.
func lostFragments(ctx context.Context, b blob.Bucket, m *format.Manifest, o Options) (lost []uint64, undone uint64, err error) {
	if m.Transaction.Kind == format.KindMerge {
		return nil, 0, nil
	}
	var old []format.Fragment
	for _, f := range m.Transaction.Added {
		if f.Created.IsZero() || o.Now().Sub(f.Created) < format.MinGCAge-time.Minute {
			continue
		}
		old = append(old, f)
	}
	if len(old) == 0 {
		return nil, 0, nil
	}
	keys := make([]string, len(old))
	for i, f := range old {
		keys[i] = f.Key
	}
	gone, err := goneOrDoomed(ctx, b, keys)
	if err != nil {
		return nil, 0, err
	}
	var missing []format.Fragment
	for _, f := range old {
		if gone[f.Key] {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 {
		return nil, 0, nil
	}
	latest, err := table.ReadLatest(ctx, b)
	if err != nil {
		return nil, 0, err
	}
	if latest.Version < m.Version {
		latest = m // a listing that lags behind
	}
	removed := map[uint64]bool{}
	for _, f := range missing {
		if g := latest.Fragment(f.ID); g != nil && g.Key == f.Key {
			lost = append(lost, f.ID)
		} else {
			removed[f.ID] = true
		}
	}
	if len(lost) > 0 || len(removed) == 0 {
		return lost, 0, nil
	}
	gap := false
	for v := m.Version + 1; v <= latest.Version && len(removed) > 0; v++ {
		t, err := table.ReadTransaction(ctx, b, v)
		if errors.Is(err, format.ErrVersionNotFound) {
			gap = true
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		if t.Undoes == m.Version {
			return nil, v, nil
		}
		for _, id := range t.Removed {
			delete(removed, id)
		}
	}
	if len(removed) > 0 && gap {
		return nil, 0, fmt.Errorf("v%d landed, then its fragments were removed and the versions since were collected: whether a compaction kept their rows or a repair took them out cannot be told: %w", m.Version, ErrOutcomeUnknown)
	}
	return nil, 0, nil
}

// resurrected tells whether the manifest at v, just created, brought back
// a version garbage collection had deleted, and if so why it thinks so
// ("" when it did not). Versions are created in order, each by a writer
// that read the one before, so a version above v created before ours
// means v had existed and was collected: ours is a ghost. Garbage
// collection keeps the newest versions, so some version above v exists if
// v was collected. Times come from the store's clock on both objects.
//
//   - v+1 exists: created after ours, it was built on ours; before ours,
//     ours is a ghost. One request, by name (no listing involved).
//   - v+1 does not exist: we are the newest, unless a newer version shows
//     in the listing (then v+1 was collected) or a GC boundary at or above
//     v was created no later than ours.
func resurrected(ctx context.Context, b blob.Bucket, v uint64) (string, error) {
	ours, err := b.Attributes(ctx, format.ManifestKey(v))
	if errors.Is(err, blob.ErrNotFound) {
		return "", nil // collected since: newer versions hold it
	}
	if err != nil {
		return "", err
	}
	next, err := b.Attributes(ctx, format.ManifestKey(v+1))
	if err == nil {
		if next.ModTime.After(ours.ModTime) {
			return "", nil
		}
		return fmt.Sprintf("v%d was created before it", v+1), nil
	}
	if !errors.Is(err, blob.ErrNotFound) {
		return "", err
	}
	latest, err := table.LatestVersion(ctx, b)
	if err != nil {
		return "", err
	}
	if latest > v+1 {
		return fmt.Sprintf("v%d exists and v%d was collected", latest, v+1), nil
	}
	return table.CoveredAfter(ctx, b, v, &ours)
}
