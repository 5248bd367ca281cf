package commit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// Undo commits a Rewrite that takes back what the commit that made m did
// to the fragments: it removes every fragment it added, puts back every
// fragment it removed (a compaction's sources) as fresh copies of their
// objects, which must still be there, and gives the fragments an upsert
// deleted from their deletion vectors from before, as fresh copies too
// (a fragment a compaction rewrote since gets the rows back in a fresh
// copy of it that holds them alone). A commit that finds its data taken by garbage collection after
// it landed undoes itself; the compactor undoes such a commit when its
// writer died before it could (see compactor.Repair).
func Undo(ctx context.Context, b blob.Bucket, m *format.Manifest, opts *Options) error {
	o, err := opts.resolve()
	if err != nil {
		return err
	}
	repair := format.Transaction{Kind: format.KindRewrite, Writer: cmp.Or(o.Writer, m.Transaction.Writer), Undoes: m.Version}
	for _, f := range m.Transaction.Added {
		repair.Removed = append(repair.Removed, f.ID)
	}
	if len(m.Transaction.Removed) > 0 || len(m.Transaction.Deletions) > 0 {
		var parent *format.Manifest
		err := retryTransient(ctx, o, func() (err error) { parent, err = table.ReadManifest(ctx, b, m.Parent); return err })
		if err != nil {
			return err
		}
		// An upsert's deletion vectors go back to what they were, as
		// fresh copies (for the reason below) — but for the rows whose
		// keys a keyed commit after m wrote again (see undoOnLatest).
		later, err := laterKeysOf(ctx, b, m, o)
		if err != nil {
			return err
		}
		for _, d := range m.Transaction.Deletions {
			f := parent.Fragment(d.FragmentID)
			if f == nil {
				return fmt.Errorf("fragment %d of v%d is not in v%d", d.FragmentID, m.Version, m.Parent)
			}
			del, err := copyDeletion(ctx, b, f, m.Version, later, o)
			if err != nil {
				return fmt.Errorf("the deletion vector of fragment %d it replaced: %w", f.ID, err)
			}
			repair.Deletions = append(repair.Deletions, format.FragmentDeletion{FragmentID: f.ID, Deletion: del})
		}
		for _, id := range m.Transaction.Removed {
			f := parent.Fragment(id)
			if f == nil {
				return fmt.Errorf("fragment %d of v%d is not in v%d", id, m.Version, m.Parent)
			}
			// A copy, not the object itself: the object is old and no
			// version garbage collection may have read references it, so
			// a collection running now could delete it after this commit
			// lands. A fresh copy is young, safe for the safety age.
			g, err := copyFragment(ctx, b, *f, m.Version, o)
			if err != nil {
				return fmt.Errorf("the fragment %s it replaced: %w", f.Key, err)
			}
			repair.Added = append(repair.Added, g)
		}
	}
	// The repair keeps one commit id across attempts, so an attempt whose
	// outcome was unknown is recognised by the next, never applied twice;
	// it must not give up on a transient error, since until it lands the
	// newest version references data that is gone.
	repair.CommitID = format.NewID()
	o.CatchUp = true
	err = retryTransient(ctx, o, func() error {
		_, err := Commit(ctx, b, m, repair, &o)
		return err
	})
	// A later commit changed a fragment whose vector the repair gives
	// back (an update or a delete of other rows there, on top of the
	// commit undone), or one it removes (an upsert replaced keys the
	// undone commit's lost rows held): the repair is planned again on the
	// latest version — the vectors it gives back taking out only the rows
	// the undone commit deleted, the fragments it removes removed as they
	// are now. Planned from m alone, the repair would meet that commit
	// every time, and the table would reference the lost data for good.
	for replans := 0; IsRetryableConflict(err) && replans < o.MaxReplans; replans++ {
		err = undoOnLatest(ctx, b, m, repair, o)
	}
	return err
}

// undoOnLatest commits repair (an Undo of m) planned again on the latest
// version: each fragment m gave a vector gets the latest vector without
// the rows m's added to its parent's — but for those whose keys a keyed
// commit after m wrote again (an upsert, a merge of a shard's upserts):
// that commit replaced them, and given back they would stand beside its
// rows; the fragments m added are removed.
func undoOnLatest(ctx context.Context, b blob.Bucket, m *format.Manifest, repair format.Transaction, o Options) error {
	var cur, parent *format.Manifest
	err := retryTransient(ctx, o, func() (err error) {
		if cur, err = table.ReadLatest(ctx, b); err == nil && len(m.Transaction.Deletions) > 0 {
			parent, err = table.ReadManifest(ctx, b, m.Parent)
		}
		return err
	})
	if err != nil {
		return err
	}
	// Another taking back of m landed first (a repair that met m twice,
	// or ran beside this one): m is undone, and once is all.
	if u, err := undoneBetween(ctx, b, m.Version, cur.Version, o); err != nil || u != 0 {
		return err
	}
	var later []laterKeys
	if len(m.Transaction.Deletions) > 0 {
		if later, err = keysWrittenAfter(ctx, b, m.Version, cur, o); err != nil {
			return err
		}
	}
	repair.Deletions, repair.Added = nil, slices.Clone(repair.Added)
	for _, d := range m.Transaction.Deletions {
		now, was := cur.Fragment(d.FragmentID), parent.Fragment(d.FragmentID)
		if was == nil {
			return fmt.Errorf("fragment %d that v%d deleted from is not in v%d", d.FragmentID, m.Version, m.Parent)
		}
		if now == nil {
			// Rewritten since m: a compaction took its live rows, without
			// those m deleted. They come back alone, in a fresh copy of the
			// fragment as it was before m.
			back, err := rowsBack(ctx, b, was, d.Deletion, later, cur.Version, o)
			if err != nil {
				return fmt.Errorf("the rows v%d deleted from fragment %d, rewritten since: %w", m.Version, d.FragmentID, err)
			}
			if back != nil {
				repair.Added = append(repair.Added, *back)
			}
			continue
		}
		mine := *now
		del := d.Deletion
		mine.Deletion = &del
		// Untouched since m (its vector still the fragment's), the
		// fragment gets its vector from before m back, with the rows
		// later keyed commits replaced: m's own vector, which garbage
		// collection may have taken (why m is taken back), is not read.
		untouched := now.Deletion != nil && now.Deletion.Key == d.Deletion.Key
		var latest, before, undone []uint32
		err := retryTransient(ctx, o, func() (err error) {
			if before, err = format.ReadDeletions(ctx, b, was); err != nil || untouched {
				return err
			}
			if latest, err = format.ReadDeletions(ctx, b, now); err != nil {
				return err
			}
			undone, err = format.ReadDeletions(ctx, b, &mine)
			return err
		})
		if err != nil {
			return fmt.Errorf("the deletion vectors of fragment %d: %w", d.FragmentID, err)
		}
		replaced, err := replacedRows(ctx, b, was, later, o)
		if err != nil {
			return err
		}
		rows := format.MinusSorted(latest, format.MinusSorted(format.MinusSorted(undone, before), replaced))
		if untouched {
			rows = format.UnionSorted(before, replaced)
		}
		vec, err := putDeletions(ctx, b, now.ID, cur.Version, rows, o)
		if err != nil {
			return err
		}
		repair.Deletions = append(repair.Deletions, format.FragmentDeletion{FragmentID: now.ID, Deletion: vec})
	}
	repair.CommitID, repair.ReadVersion = format.NewID(), cur.Version
	return retryTransient(ctx, o, func() error {
		_, err := Commit(ctx, b, cur, repair, &o)
		return err
	})
}

// rowsBack returns a fresh copy of was (a fragment as it was before an
// undone commit, which gave it vector del) that holds only the rows del
// deleted, less those later keyed commits wrote again; nil when there
// are none. Its vector, written for a commit on top of version v, is
// every other row.
func rowsBack(ctx context.Context, b blob.Bucket, was *format.Fragment, del format.Deletion, later []laterKeys, v uint64, o Options) (*format.Fragment, error) {
	mine := *was
	mine.Deletion = &del
	var before, undone []uint32
	err := retryTransient(ctx, o, func() (err error) {
		if was.Deletion != nil {
			if before, err = format.ReadDeletions(ctx, b, was); err != nil {
				return err
			}
		}
		undone, err = format.ReadDeletions(ctx, b, &mine)
		return err
	})
	if err != nil {
		return nil, err
	}
	replaced, err := replacedRows(ctx, b, was, later, o)
	if err != nil {
		return nil, err
	}
	keep := format.MinusSorted(format.MinusSorted(undone, before), replaced)
	if len(keep) == 0 {
		return nil, nil
	}
	plain := *was
	plain.Deletion = nil
	g, err := copyFragment(ctx, b, plain, v, o)
	if err != nil {
		return nil, err
	}
	var rows []uint32
	for r, k := uint32(0), 0; int64(r) < was.Rows; r++ {
		if k < len(keep) && keep[k] == r {
			k++
			continue
		}
		rows = append(rows, r)
	}
	vec, err := putDeletions(ctx, b, was.ID, v, rows, o)
	if err != nil {
		return nil, err
	}
	g.Deletion = &vec
	return &g, nil
}

// copyFragment copies f's data object, and its deletion vector if any, to
// fresh names, retrying transient errors.
func copyFragment(ctx context.Context, b blob.Bucket, f format.Fragment, v uint64, o Options) (format.Fragment, error) {
	copyObject := func(from, to string) error {
		return retryTransient(ctx, o, func() error {
			r, err := b.NewRangeReader(ctx, from, 0, -1)
			if err != nil {
				return err
			}
			defer r.Close()
			return b.Put(ctx, to, r)
		})
	}
	g := f
	g.Key, g.Created = format.NewFragmentKey(), o.Now().UTC()
	if err := copyObject(f.Key, g.Key); err != nil {
		return g, err
	}
	if f.Deletion != nil {
		d := *f.Deletion
		d.Key = format.DeletionKey(f.ID, v)
		if err := copyObject(f.Deletion.Key, d.Key); err != nil {
			return g, err
		}
		g.Deletion = &d
	}
	return g, nil
}

// copyDeletion writes fragment f's deletion vector again under a fresh
// key (an empty one when f has none), for a commit on top of version v,
// with the rows whose keys later wrote again (replacedRows).
func copyDeletion(ctx context.Context, b blob.Bucket, f *format.Fragment, v uint64, later []laterKeys, o Options) (format.Deletion, error) {
	var rows []uint32
	if f.Deletion != nil {
		err := retryTransient(ctx, o, func() (err error) { rows, err = format.ReadDeletions(ctx, b, f); return err })
		if err != nil {
			return format.Deletion{}, err
		}
	}
	replaced, err := replacedRows(ctx, b, f, later, o)
	if err != nil {
		return format.Deletion{}, err
	}
	return putDeletions(ctx, b, f.ID, v, format.UnionSorted(rows, replaced), o)
}

// putDeletions writes rows as fragment id's deletion vector under a
// fresh key, for a commit on top of version v.
func putDeletions(ctx context.Context, b blob.Bucket, id, v uint64, rows []uint32, o Options) (format.Deletion, error) {
	del := format.Deletion{Key: format.DeletionKey(id, v+1), Count: int64(len(rows))}
	body := format.EncodeDeletions(rows)
	err := retryTransient(ctx, o, func() error {
		err := b.PutIfAbsent(ctx, del.Key, body)
		if errors.Is(err, blob.ErrExists) {
			return nil // ours, under a lost answer: the key is fresh
		}
		return err
	})
	return del, err
}
