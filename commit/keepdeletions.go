package commit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// KeepDeletions is keepDeletions for a commit made elsewhere that gave
// fragments deletion vectors written after written (res: its result;
// bodies: the vectors' bodies by key), such as a merge that drops copies
// of named appends by vectors on the fragments it adds.
func (t *Table) KeepDeletions(ctx context.Context, res Result, dels []format.FragmentDeletion, bodies map[string][]byte, written time.Time) (Result, error) {
	return t.keepDeletions(ctx, res, dels, bodies, written)
}

// keepDeletions makes sure the deletion vectors of a Delete that landed
// are still there. A writer that stalled longer than garbage collection's
// safety age between writing them and landing may find them collected as
// orphans (or listed in an orphan record, to be deleted): the version then
// references objects that are gone. The writer still holds their bodies,
// so it writes them again under fresh keys and commits a Delete that
// points the fragments at the copies; the delete is acknowledged only once
// the table is whole. Vectors younger than format.MinGCAge − 1 minute cannot
// have been collected, so the common path costs nothing.
func (t *Table) keepDeletions(ctx context.Context, res Result, dels []format.FragmentDeletion, bodies map[string][]byte, written time.Time) (Result, error) {
	for range t.opts.MaxReplans {
		if t.opts.Now().Sub(written) < format.MinGCAge-time.Minute {
			return res, nil
		}
		var latest *table.Snapshot
		if err := retryTransient(ctx, t.opts, func() (err error) { latest, err = t.Refresh(ctx); return err }); err != nil {
			return Result{}, err
		}
		m := latest.Manifest()
		if m.Version < res.Version {
			m = res.Manifest // a listing that lags behind
		}
		// The vectors still in place are looked for, and in the orphan
		// records (see goneOrDoomed).
		var kept []format.FragmentDeletion
		for _, d := range dels {
			f := m.Fragment(d.FragmentID)
			if f == nil || f.Deletion == nil || f.Deletion.Key != d.Deletion.Key {
				// Compacted or deleted from since (which read the vector
				// before it went), or a repair took the delete back.
				undone, err := t.undoneSince(ctx, res.Version, m.Version)
				if err != nil {
					return Result{}, err
				}
				if undone != 0 {
					return Result{}, &ConflictError{Ours: format.Transaction{Kind: format.KindDelete, ReadVersion: res.Version}, Version: undone,
						Retryable: true, LostData: true,
						Reason: fmt.Sprintf("stalled past garbage collection: v%d's deletion vectors were collected and a repair took the delete back at v%d; delete again", res.Version, undone)}
				}
				continue
			}
			kept = append(kept, d)
		}
		keys := make([]string, len(kept))
		for i, d := range kept {
			keys[i] = d.Deletion.Key
		}
		var gone map[string]bool
		if err := retryTransient(ctx, t.opts, func() (err error) { gone, err = goneOrDoomed(ctx, t.b, keys); return err }); err != nil {
			return Result{}, fmt.Errorf("commit: checking the deletion vectors of v%d after a stall: %w", res.Version, err)
		}
		repoint := format.Transaction{Kind: format.KindDelete, CommitID: format.NewID(), ReadVersion: m.Version}
		var next []format.FragmentDeletion
		copied := t.opts.Now()
		for _, d := range kept {
			if !gone[d.Deletion.Key] {
				continue
			}
			key := format.DeletionKey(d.FragmentID, m.Version+1)
			bodies[key] = bodies[d.Deletion.Key]
			err := retryTransient(ctx, t.opts, func() error {
				err := t.b.PutIfAbsent(ctx, key, bodies[key])
				if errors.Is(err, blob.ErrExists) {
					return nil // ours, landed under a lost answer: the key is fresh
				}
				return err
			})
			if err != nil {
				return Result{}, err
			}
			nd := format.FragmentDeletion{FragmentID: d.FragmentID, Deletion: format.Deletion{Key: key, Count: d.Deletion.Count}}
			repoint.Deletions = append(repoint.Deletions, nd)
			next = append(next, nd)
		}
		if len(repoint.Deletions) == 0 {
			return res, nil
		}
		r, err := t.Commit(ctx, repoint)
		if err != nil && !IsRetryableConflict(err) {
			return Result{}, fmt.Errorf("commit: v%d's deletion vectors were collected during a stall, and pointing the fragments at fresh copies failed: %w", res.Version, err)
		}
		if err == nil {
			// The copies are checked in turn, should this commit have
			// stalled too.
			res, dels, written = r, next, copied
		}
	}
	return Result{}, fmt.Errorf("commit: v%d's deletion vectors were collected during a stall, and %d attempts to point the fragments at fresh copies did not land", res.Version, t.opts.MaxReplans)
}
