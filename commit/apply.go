package commit

import (
	"fmt"
	"slices"
	"time"

	"github.com/stratadb/strata/table"
)

// Apply returns the manifest that committing txn on top of cur makes:
// version cur.Version+1, with txn recorded (its added fragments by id).
// It fails with a retryable *ConflictError when txn refers to fragments
// cur no longer has.
func Apply(cur *table.Manifest, txn *table.Transaction) (*table.Manifest, error) {
	next := cur.Clone()
	next.Version = cur.Version + 1
	next.Parent = cur.Version
	next.Timestamp = time.Now().UTC()
	rec := *txn
	rec.Added, rec.AddedIDs = nil, nil
	gone := func(id uint64) error {
		return &ConflictError{Ours: *txn, Version: cur.Version, Retryable: true,
			Reason: fmt.Sprintf("fragment %d is no longer in version %d", id, cur.Version)}
	}
	addFragments := func() {
		for _, f := range txn.Added {
			f.ID = next.NextFragmentID
			next.NextFragmentID++
			next.Fragments = append(next.Fragments, f)
			rec.AddedIDs = append(rec.AddedIDs, f.ID)
		}
	}
	switch txn.Kind {
	case table.KindAppend:
		addFragments()
	case table.KindMerge:
		addFragments()
		if next.Shards == nil {
			next.Shards = map[string]table.ShardMark{}
		}
		next.Shards[txn.Shard] = table.ShardMark{Watermark: txn.Watermark, Epoch: txn.Epoch}
	case table.KindDelete:
		for _, d := range txn.Deletions {
			f := findFragment(next, d.FragmentID)
			if f == nil {
				return nil, gone(d.FragmentID)
			}
			del := d.Deletion
			f.Deletion = &del
		}
	case table.KindRewrite:
		for _, id := range txn.Removed {
			if findFragment(next, id) == nil {
				return nil, gone(id)
			}
		}
		next.Fragments = slices.DeleteFunc(next.Fragments, func(f table.Fragment) bool { return slices.Contains(txn.Removed, f.ID) })
		addFragments()
	case table.KindOverwrite:
		rec.Removed = nil
		for _, f := range next.Fragments {
			rec.Removed = append(rec.Removed, f.ID)
		}
		next.Fragments = nil
		next.SchemaIPC = txn.SchemaIPC
		addFragments()
	case table.KindCreateIndex:
		// The index objects are named by the transaction's fragments list
		// in a later format; nothing else changes.
	default:
		return nil, fmt.Errorf("commit: cannot apply a %q transaction to an existing table", txn.Kind)
	}
	next.Transaction = rec
	if txn.Kind == table.KindOverwrite {
		if err := table.Refresh(next); err != nil {
			return nil, err
		}
	}
	return next, nil
}

func findFragment(m *table.Manifest, id uint64) *table.Fragment {
	for i := range m.Fragments {
		if m.Fragments[i].ID == id {
			return &m.Fragments[i]
		}
	}
	return nil
}
