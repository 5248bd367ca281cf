package changes

import (
	"context"
	"errors"
	"slices"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// deletionsAt reads fragment f's deletion vector as version v records it.
// A vector object garbage collection took while its delete stalled is
// read from the copy a later version points the fragment at (the
// deleter's repair, or a repair's of a merge's vector: a vector of the
// same count under a fresh key, see commit.Table.Delete and
// compactor.Repair); none found, the error is the read's.
func deletionsAt(ctx context.Context, b blob.Bucket, v uint64, f *format.Fragment) ([]uint32, error) {
	rows, err := format.ReadDeletions(ctx, b, f)
	if !errors.Is(err, blob.ErrNotFound) {
		return rows, err
	}
	copied, cerr := copyAfter(ctx, b, v, f)
	if cerr != nil || copied == nil {
		return nil, errors.Join(err, cerr)
	}
	g := *f
	g.Deletion = copied
	return format.ReadDeletions(ctx, b, &g)
}

// copyAfter finds the copy of fragment f's deletion vector (as version v
// records it) that a later version points the fragment at: a vector of
// the same count under another key. nil when there is none (the fragment
// compacted or taken back since, or deleted from again).
func copyAfter(ctx context.Context, b blob.Bucket, v uint64, f *format.Fragment) (*format.Deletion, error) {
	latest, err := table.LatestVersion(ctx, b)
	if err != nil {
		return nil, err
	}
	for u := v + 1; u <= latest; u++ {
		m, err := table.ReadManifest(ctx, b, u)
		if err != nil {
			return nil, err
		}
		g := m.Fragment(f.ID)
		if g == nil || g.Deletion == nil {
			return nil, nil // compacted or taken back since: no copy
		}
		if g.Deletion.Key == f.Deletion.Key {
			continue
		}
		if g.Deletion.Count != f.Deletion.Count {
			return nil, nil // a later delete, not a copy
		}
		d := *g.Deletion
		return &d, nil
	}
	return nil, nil
}

// withVectorsAt returns frags, which version v adds, with each deletion
// vector that is gone replaced by the copy a later version points the
// fragment at (see deletionsAt): a merge that dropped copies of named
// appends by a vector on a fragment it added, and stalled past garbage
// collection's safety age, has its vector written again by a repair. It
// looks for each such vector (one request each: only merges that dropped
// a copy give an added fragment a vector).
func withVectorsAt(ctx context.Context, b blob.Bucket, v uint64, frags []format.Fragment) ([]format.Fragment, error) {
	var out []format.Fragment
	for i, f := range frags {
		if f.Deletion == nil || f.Deletion.Count == f.Rows {
			continue
		}
		_, err := b.Attributes(ctx, f.Deletion.Key)
		if !errors.Is(err, blob.ErrNotFound) {
			if err != nil {
				return nil, err
			}
			continue
		}
		copied, cerr := copyAfter(ctx, b, v, &f)
		if cerr != nil || copied == nil {
			return nil, errors.Join(err, cerr)
		}
		if out == nil {
			out = slices.Clone(frags)
		}
		out[i].Deletion = copied
	}
	if out == nil {
		return frags, nil
	}
	return out, nil
}
