package commit

import (
	"cmp"
	"context"
	"fmt"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
)

// Undo commits a Rewrite that takes back what the commit that made m did
// to the fragments: it removes every fragment it added and puts back every
// fragment it removed (a compaction's sources) as fresh copies of their
// objects, which must still be there. A commit that finds its data taken by garbage collection after
// it landed undoes itself; the compactor undoes such a commit when its
// writer died before it could (see compactor.Repair).
func Undo(ctx context.Context, b blob.Bucket, m *table.Manifest, opts *Options) error {
	o, err := opts.resolve()
	if err != nil {
		return err
	}
	repair := table.Transaction{Kind: table.KindRewrite, Writer: cmp.Or(o.Writer, m.Transaction.Writer), Undoes: m.Version}
	for _, f := range m.Transaction.Added {
		repair.Removed = append(repair.Removed, f.ID)
	}
	if len(m.Transaction.Removed) > 0 {
		var parent *table.Manifest
		err := retryTransient(ctx, o, func() (err error) { parent, err = table.ReadManifest(ctx, b, m.Parent); return err })
		if err != nil {
			return err
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
	repair.CommitID = table.NewID()
	o.CatchUp = true
	return retryTransient(ctx, o, func() error {
		_, err := Commit(ctx, b, m, repair, &o)
		return err
	})
}

// copyFragment copies f's data object, and its deletion vector if any, to
// fresh names, retrying transient errors.
func copyFragment(ctx context.Context, b blob.Bucket, f table.Fragment, v uint64, o Options) (table.Fragment, error) {
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
	g.Key, g.Created = table.NewFragmentKey(), o.Now().UTC()
	if err := copyObject(f.Key, g.Key); err != nil {
		return g, err
	}
	if f.Deletion != nil {
		d := *f.Deletion
		d.Key = table.DeletionKey(f.ID, v)
		if err := copyObject(f.Deletion.Key, d.Key); err != nil {
			return g, err
		}
		g.Deletion = &d
	}
	return g, nil
}
