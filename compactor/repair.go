package compactor

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
)

// ErrMissingData: the newest version references a data object that is
// gone, and no kept version says which commit added it, so it cannot be
// undone. Nothing is deleted while it lasts.
var ErrMissingData = errors.New("compactor: the newest version references data that is gone")

// RepairResult says what a repair did.
type RepairResult struct {
	Missing []string // keys of the newest version's fragments that are gone
	Undone  []uint64 // versions whose commits were taken back
}

// Repair makes the newest version readable again when fragments it
// references are gone. That happens in one case only: a writer stalled
// longer than garbage collection's safety age, its upload was collected
// as an orphan, its manifest landed anyway, and the writer died before it
// could undo its own commit (commit.Undo), which it does when it lives.
// The commit was never acknowledged, so undoing it loses nothing: its
// fragments are taken out of the table and, for a compaction, its sources
// put back.
//
// exists reports whether a key is in the bucket; nil checks each fragment
// of the newest version with a request. A key it calls missing is checked
// again by name before anything is undone, so a listing that lags behind
// recent creates cannot make a present fragment look lost.
func Repair(ctx context.Context, b blob.Bucket, opts *commit.Options, exists func(key string) bool) (RepairResult, error) {
	var res RepairResult
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		return res, err
	}
	missing := map[uint64]bool{}
	for _, f := range m.Fragments {
		if exists != nil && exists(f.Key) {
			continue
		}
		_, err := b.Attributes(ctx, f.Key)
		if errors.Is(err, blob.ErrNotFound) {
			missing[f.ID] = true
			res.Missing = append(res.Missing, f.Key)
		} else if err != nil {
			return res, err
		}
	}
	if len(missing) == 0 {
		return res, nil
	}
	// Walk back from the newest version to the commits that added them.
	for v := m.Version; v > 0 && len(missing) > 0; {
		cur, err := table.ReadManifest(ctx, b, v)
		if errors.Is(err, table.ErrVersionNotFound) {
			break
		}
		if err != nil {
			return res, err
		}
		added := false
		for _, f := range cur.Transaction.Added {
			if missing[f.ID] {
				delete(missing, f.ID)
				added = true
			}
		}
		if added {
			if err := commit.Undo(ctx, b, cur, opts); err != nil {
				return res, fmt.Errorf("compactor: undoing v%d, whose data is gone: %w", v, err)
			}
			res.Undone = append(res.Undone, v)
		}
		v = cur.Parent
	}
	if len(missing) > 0 {
		ids := slices.Sorted(func(yield func(uint64) bool) {
			for id := range missing {
				if !yield(id) {
					return
				}
			}
		})
		return res, fmt.Errorf("%w: fragments %v of v%d", ErrMissingData, ids, m.Version)
	}
	return res, nil
}
