package lakehouse

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go"

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
// (one GET each). A table without a view gives empty Refs.
func ReadRefs(ctx context.Context, b blob.Bucket) (Refs, error) {
	refs := Refs{Keys: map[string]bool{HintKey: true}}
	v, err := readView(ctx, b)
	if err != nil || v.meta == nil {
		return refs, err
	}
	refs.Keys[MetadataKey(v.n)] = true
	loc := v.meta.Location() + "/"
	key := func(location string) (string, error) {
		k, ok := strings.CutPrefix(location, loc)
		if !ok {
			return "", fmt.Errorf("lakehouse: %s names %s, outside the table's location %s", MetadataKey(v.n), location, loc)
		}
		return k, nil
	}
	for _, s := range v.meta.Snapshots() {
		refs.Versions = append(refs.Versions, versionOf(s))
		lk, err := key(s.ManifestList)
		if err != nil {
			return refs, err
		}
		refs.Keys[lk] = true
		data, err := b.Get(ctx, lk)
		if err != nil {
			return refs, fmt.Errorf("lakehouse: reading manifest list of snapshot %d: %w", s.SnapshotID, err)
		}
		files, err := iceberg.ReadManifestList(bytes.NewReader(data))
		if err != nil {
			return refs, fmt.Errorf("lakehouse: manifest list %s: %w", lk, err)
		}
		for _, mf := range files {
			mk, err := key(mf.FilePath())
			if err != nil {
				return refs, err
			}
			refs.Keys[mk] = true
		}
	}
	return refs, nil
}
