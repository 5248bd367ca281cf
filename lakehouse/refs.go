package lakehouse

import (
	"bytes"
	"context"
	"fmt"

	"github.com/apache/iceberg-go"
	itable "github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/blob"
)

// Refs is what a table's Iceberg view holds on to: what garbage
// collection must keep while the newest metadata names it.
type Refs struct {
	// Versions are the Strata versions its snapshots describe: collected,
	// a reader of that snapshot would find its files gone.
	Versions []uint64
	// Keys are the view's own objects still in use: the newest metadata,
	// the hint, and the manifest lists and manifests of its snapshots.
	// Position-delete files live as long as the deletion vectors they were
	// made from (DeleteFileKey).
	Keys map[string]bool
}

// ReadRefs reads the newest metadata and its snapshots' manifest lists
// (one GET each, up to concurrency at once). A table without a view gives
// empty Refs.
func ReadRefs(ctx context.Context, b blob.Bucket) (Refs, error) {
	refs := Refs{Keys: map[string]bool{HintKey: true}}
	v, err := readView(ctx, b)
	if err != nil || v.meta == nil {
		return refs, err
	}
	refs.Keys[MetadataKey(v.n)] = true
	loc := v.meta.Location()
	var snaps []itable.Snapshot
	for _, s := range v.meta.Snapshots() {
		refs.Versions = append(refs.Versions, versionOf(s))
		snaps = append(snaps, s)
	}
	listed := make([][]string, len(snaps)) // each snapshot's list and manifests
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for i, s := range snaps {
		g.Go(func() error {
			lk, err := objectKey(loc, s.ManifestList)
			if err != nil {
				return err
			}
			data, err := b.Get(gctx, lk)
			if err != nil {
				return fmt.Errorf("lakehouse: reading manifest list of snapshot %d: %w", s.SnapshotID, err)
			}
			files, err := iceberg.ReadManifestList(bytes.NewReader(data))
			if err != nil {
				return damagedList(lk, err)
			}
			keys := []string{lk}
			for _, mf := range files {
				mk, err := objectKey(loc, mf.FilePath())
				if err != nil {
					return err
				}
				keys = append(keys, mk)
			}
			listed[i] = keys
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return refs, err
	}
	for _, keys := range listed {
		for _, k := range keys {
			refs.Keys[k] = true
		}
	}
	return refs, nil
}
