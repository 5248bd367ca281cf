package layout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/avro"
	"github.com/twmb/avro/ocf"
	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
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

// concurrency bounds the manifest lists read at once.
const concurrency = 16

// Metadata is the newest metadata of a view, as found by Newest.
type Metadata struct {
	N    int    // its number; 0: no view yet
	Hint int    // what the hint says (0: no hint)
	Raw  []byte // its JSON
}

// Newest finds the newest metadata: the hint's number, then by name past
// it (a hint is written after its metadata, so it may lag). The hint is
// advisory: when there is none, or it is not a number, or it names
// metadata that is not there, a listing of the metadata finds the newest.
func Newest(ctx context.Context, b blob.Bucket) (Metadata, error) {
	hint := 0
	data, err := b.Get(ctx, HintKey)
	if err != nil && !errors.Is(err, blob.ErrNotFound) {
		return Metadata{}, err
	}
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && n > 0 {
			hint = n
		}
	}
	m, err := newestFrom(ctx, b, hint)
	if errors.Is(err, blob.ErrNotFound) && hint > 0 {
		m, err = newestFrom(ctx, b, 0) // the hint named metadata that is not there
	}
	m.Hint = hint
	return m, err
}

// newestFrom reads the newest metadata numbered n or above (n = 0:
// listing the metadata first).
func newestFrom(ctx context.Context, b blob.Bucket, n int) (Metadata, error) {
	if n == 0 {
		for o, err := range blob.List(ctx, b, MetadataDir, 0) {
			if err != nil {
				return Metadata{}, err
			}
			if k, ok := ParseMetadataKey(o.Key); ok && k > n {
				n = k
			}
		}
		if n == 0 {
			return Metadata{}, nil
		}
	}
	for {
		_, err := b.Attributes(ctx, MetadataKey(n+1))
		if errors.Is(err, blob.ErrNotFound) {
			break
		}
		if err != nil {
			return Metadata{}, err
		}
		n++
	}
	raw, err := b.Get(ctx, MetadataKey(n))
	if err != nil {
		return Metadata{}, fmt.Errorf("lakehouse: reading %s: %w", MetadataKey(n), err)
	}
	return Metadata{N: n, Raw: raw}, nil
}

// NotMetadata is the error of metadata n that does not parse.
func NotMetadata(n int, err error) error {
	return fmt.Errorf("lakehouse: %s is not Iceberg metadata (delete %s to start the view afresh): %w", MetadataKey(n), format.IcebergDir, err)
}

// DamagedList is the error of a manifest list that does not parse: the
// view cannot go on from it (nor garbage collection know what it holds on
// to) until it is started afresh; the table's own data is not affected.
func DamagedList(list string, err error) error {
	return fmt.Errorf("lakehouse: manifest list %s is not Iceberg Avro (delete %s to start the view afresh): %w", list, format.IcebergDir, err)
}

// held is what Refs reads of the metadata.
type held struct {
	Location  *string `json:"location"`
	Snapshots []struct {
		SnapshotID   *int64  `json:"snapshot-id"`
		ManifestList *string `json:"manifest-list"`
	} `json:"snapshots"`
}

// ReadRefs reads the newest metadata and its snapshots' manifest lists
// (one GET each, up to 16 at once). A table without a view gives empty
// Refs.
func ReadRefs(ctx context.Context, b blob.Bucket) (Refs, error) {
	refs := Refs{Keys: map[string]bool{HintKey: true}}
	m, err := Newest(ctx, b)
	if err != nil || m.N == 0 {
		return refs, err
	}
	var meta held
	if err := json.Unmarshal(m.Raw, &meta); err != nil {
		return refs, NotMetadata(m.N, err)
	}
	if meta.Location == nil {
		return refs, NotMetadata(m.N, errors.New(`no "location"`))
	}
	for i, s := range meta.Snapshots {
		if s.SnapshotID == nil || s.ManifestList == nil || *s.SnapshotID <= 0 {
			return refs, NotMetadata(m.N, fmt.Errorf(`snapshot %d has no positive "snapshot-id" or no "manifest-list"`, i))
		}
	}
	refs.Keys[MetadataKey(m.N)] = true
	loc := *meta.Location
	listed := make([][]string, len(meta.Snapshots)) // each snapshot's list and manifests
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for i, s := range meta.Snapshots {
		refs.Versions = append(refs.Versions, uint64(*s.SnapshotID))
		g.Go(func() error {
			lk, err := ObjectKey(loc, *s.ManifestList)
			if err != nil {
				return err
			}
			data, err := b.Get(gctx, lk)
			if err != nil {
				return fmt.Errorf("lakehouse: reading manifest list of snapshot %d: %w", *s.SnapshotID, err)
			}
			paths, err := manifestPaths(data)
			if err != nil {
				return DamagedList(lk, err)
			}
			keys := []string{lk}
			for _, p := range paths {
				mk, err := ObjectKey(loc, p)
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

// manifestPaths reads the manifest_path of each entry of a manifest list
// (an Avro object container file, Iceberg's manifest_file records): all
// that garbage collection needs of it. It reads the Avro directly rather
// than through iceberg-go, whose initialization would cost every program
// that collects garbage (the strata command's table verbs among them)
// about 6 ms at start-up.
func manifestPaths(list []byte) ([]string, error) {
	r, err := ocf.NewReader(bytes.NewReader(list), ocf.WithReaderSchema(manifestPathSchema()))
	if err != nil {
		return nil, err
	}
	defer r.Close() // a zstd block's decoder holds goroutines until then
	var paths []string
	for {
		var e struct {
			ManifestPath string `avro:"manifest_path"`
		}
		err := r.Decode(&e)
		if errors.Is(err, io.EOF) {
			return paths, nil
		}
		if err != nil {
			return nil, err
		}
		if e.ManifestPath == "" {
			return nil, fmt.Errorf("entry %d has an empty manifest_path", len(paths))
		}
		paths = append(paths, e.ManifestPath)
	}
}

// manifestPathSchema is the part of Iceberg's manifest_file record that
// manifestPaths reads (the writer's other fields are skipped), parsed on
// first use.
var manifestPathSchema = sync.OnceValue(func() *avro.Schema {
	return avro.MustParse(`{"type": "record", "name": "manifest_file", "fields": [{"name": "manifest_path", "type": "string"}]}`)
})
