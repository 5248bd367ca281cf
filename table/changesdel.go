package table

import (
	"context"
	"errors"

	"github.com/stratadb/strata/blob"
)

// deletionsAt reads fragment f's deletion vector as version v records it.
// A vector object garbage collection took while its delete stalled is
// read from the copy a later version points the fragment at (the
// deleter's repair: a vector of the same count under a fresh key, see
// commit.Table.Delete); none found, the error is the read's.
func deletionsAt(ctx context.Context, b blob.Bucket, v uint64, f *Fragment) ([]uint32, error) {
	rows, err := ReadDeletions(ctx, b, f)
	if !errors.Is(err, blob.ErrNotFound) {
		return rows, err
	}
	latest, lerr := LatestVersion(ctx, b)
	if lerr != nil {
		return nil, errors.Join(err, lerr)
	}
	for u := v + 1; u <= latest; u++ {
		m, merr := ReadManifest(ctx, b, u)
		if merr != nil {
			return nil, errors.Join(err, merr)
		}
		g := m.Fragment(f.ID)
		if g == nil || g.Deletion == nil {
			return nil, err // compacted or taken back since: no copy
		}
		if g.Deletion.Key == f.Deletion.Key {
			continue
		}
		if g.Deletion.Count != f.Deletion.Count {
			return nil, err // a later delete, not a copy
		}
		return ReadDeletions(ctx, b, g)
	}
	return nil, err
}
