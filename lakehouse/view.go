package lakehouse

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	itable "github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// view is the newest metadata.
type view struct {
	n    int // its number; 0: no view yet
	hint int // what the hint says (0: no hint)
	meta itable.Metadata
}

// versionOf is the Strata version a snapshot describes.
func versionOf(s itable.Snapshot) uint64 { return uint64(s.SnapshotID) }

func (v view) versions() []uint64 {
	if v.meta == nil {
		return nil
	}
	var out []uint64
	for _, s := range v.meta.Snapshots() {
		out = append(out, versionOf(s))
	}
	slices.Sort(out)
	return out
}

// readView reads the newest metadata (layout.Newest).
func readView(ctx context.Context, b blob.Bucket) (view, error) {
	m, err := layout.Newest(ctx, b)
	if err != nil || m.N == 0 {
		return view{hint: m.Hint}, err
	}
	meta, err := itable.ParseMetadataBytes(m.Raw)
	if err != nil {
		return view{}, layout.NotMetadata(m.N, err)
	}
	return view{n: m.N, hint: m.Hint, meta: meta}, nil
}

// writeHint points readers at metadata n.
func writeHint(ctx context.Context, b blob.Bucket, n int) error {
	if err := b.Put(ctx, layout.HintKey, strings.NewReader(strconv.Itoa(n))); err != nil {
		return fmt.Errorf("lakehouse: writing %s: %w", layout.HintKey, err)
	}
	return nil
}

// wantedRefs maps each tag whose version the view describes to it.
func wantedRefs(tags []table.Tag, described []uint64) map[string]uint64 {
	out := map[string]uint64{}
	for _, t := range tags {
		if slices.Contains(described, t.Version) {
			out[t.Name] = t.Version
		}
	}
	return out
}

func sameRefs(meta itable.Metadata, want map[string]uint64, main uint64) bool {
	n := 0
	for name, r := range meta.Refs() {
		n++
		if name == itable.MainBranch {
			if uint64(r.SnapshotID) != main {
				return false
			}
			continue
		}
		if v, ok := want[name]; !ok || v != uint64(r.SnapshotID) || r.SnapshotRefType != itable.TagRef {
			return false
		}
	}
	return n == len(want)+1
}

// newBuilder starts the view: format v2, unpartitioned, unsorted, its
// UUID the Strata table id. (Not from NewMetadata, whose last-updated time
// is now: snapshots of versions older than a minute would be refused.)
func newBuilder(m *format.Manifest, loc string) (*itable.MetadataBuilder, error) {
	sc, err := icebergSchema(m.Schema(), nil, 0, nil)
	if err != nil {
		return nil, fmt.Errorf("lakehouse: version %d: %w", m.Version, err)
	}
	id := uuid.New()
	if u, err := ulid.Parse(m.TableID); err == nil {
		id = uuid.UUID(u)
	}
	bld, err := itable.NewMetadataBuilder(2)
	if err != nil {
		return nil, err
	}
	unsorted := itable.UnsortedSortOrder
	for _, step := range []func() error{
		func() error { return bld.SetUUID(id) },
		func() error { return bld.SetLoc(loc) },
		func() error { return bld.AddSchema(sc) },
		func() error { return bld.SetCurrentSchemaID(-1) },
		func() error { return bld.AddPartitionSpec(iceberg.UnpartitionedSpec, true) },
		func() error { return bld.SetDefaultSpecID(-1) },
		func() error { return bld.AddSortOrder(&unsorted) },
		func() error { return bld.SetDefaultSortOrderID(-1) },
		func() error { return bld.SetProperties(iceberg.Properties{PropTableID: m.TableID}) },
	} {
		if err := step(); err != nil {
			return nil, fmt.Errorf("lakehouse: starting the view: %w", err)
		}
	}
	return bld, nil
}
