package lakehouse

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	itable "github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"
	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
)

// Summary properties each snapshot carries.
const (
	PropVersion   = "strata.version"
	PropKind      = "strata.operation"
	PropCommitID  = "strata.commit-id"
	PropTableID   = "strata.table-id"
	PropTimestamp = "strata.timestamp"
)

// ErrInvalidOptions is the kind of error Options.Validate returns.
var ErrInvalidOptions = errors.New("lakehouse: invalid options")

// Options tune an export. A nil *Options means the defaults, which are
// garbage collection's (compactor.GCPolicy): keep them equal to the
// collection's policy so that the view describes what it keeps.
type Options struct {
	// Location is the table's address as Iceberg readers resolve it
	// (LocationOf): s3://bucket/prefix, gs://bucket/prefix, file:///path.
	// Required.
	Location string
	// Version is the newest version described, the main branch (0: the
	// latest).
	Version uint64
	// KeepVersions: the newest versions always described (default 10).
	KeepVersions int
	// RetainFor: versions younger than this are described (default 1h).
	RetainFor time.Duration
	// MaxManifests: when a snapshot would list more data (or delete)
	// manifests than this, they are merged into one (default 64).
	MaxManifests int
}

// EnsureDefaults returns a copy with every zero field set to its default.
func (o *Options) EnsureDefaults() *Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.KeepVersions == 0 {
		c.KeepVersions = table.DefaultKeepVersions
	}
	if c.RetainFor == 0 {
		c.RetainFor = table.DefaultRetention
	}
	if c.MaxManifests == 0 {
		c.MaxManifests = 64
	}
	return &c
}

// Validate checks the options once defaults are applied.
func (o *Options) Validate() error {
	c := o.EnsureDefaults()
	switch {
	case c.Location == "":
		return fmt.Errorf("%w: Location is required (see LocationOf)", ErrInvalidOptions)
	case checkLocation(c.Location) != "":
		return fmt.Errorf("%w: Location %q %s", ErrInvalidOptions, c.Location, checkLocation(c.Location))
	case c.KeepVersions < 1:
		return fmt.Errorf("%w: KeepVersions %d is below 1", ErrInvalidOptions, c.KeepVersions)
	case c.RetainFor < 0:
		return fmt.Errorf("%w: RetainFor %v is negative", ErrInvalidOptions, c.RetainFor)
	case c.MaxManifests < 2:
		return fmt.Errorf("%w: MaxManifests %d is below 2", ErrInvalidOptions, c.MaxManifests)
	}
	return nil
}

// Result says what an export did.
type Result struct {
	// MetadataKey is the newest metadata object under the table's prefix,
	// and MetadataLocation its full address (what iceberg_scan and
	// register_table take). Written says whether this export made it (an
	// export with nothing new writes nothing).
	MetadataKey      string
	MetadataLocation string
	Written          bool
	Current          uint64   // the version of the main branch
	Snapshots        []uint64 // the versions described, ascending
	Added, Dropped   []uint64 // snapshots this export added and dropped
}

// Export brings the table's Iceberg view up to date: a snapshot for each
// version garbage collection keeps, up to Options.Version. now decides
// which versions are young enough (RetainFor).
func Export(ctx context.Context, b blob.Bucket, opts *Options, now time.Time) (Result, error) {
	if err := opts.Validate(); err != nil {
		return Result{}, err
	}
	o := opts.EnsureDefaults()
	for attempt := 0; ; attempt++ {
		res, retry, err := exportOnce(ctx, b, o, now)
		if err == nil && !retry {
			return res, nil
		}
		if err != nil || attempt == 4 {
			if err == nil {
				err = errors.New("lakehouse: the view kept changing under the export (concurrent exports or collections); try again")
			}
			return res, err
		}
	}
}

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

// readView finds the newest metadata: the hint's number, then by name
// past it (a hint is written after its metadata, so it may lag). The hint
// is advisory: when there is none, or it is not a number, or it names
// metadata that is not there, a listing of the metadata finds the newest.
func readView(ctx context.Context, b blob.Bucket) (view, error) {
	hint := 0
	data, err := b.Get(ctx, HintKey)
	if err != nil && !errors.Is(err, blob.ErrNotFound) {
		return view{}, err
	}
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && n > 0 {
			hint = n
		}
	}
	v, err := readViewFrom(ctx, b, hint)
	if errors.Is(err, blob.ErrNotFound) && hint > 0 {
		v, err = readViewFrom(ctx, b, 0) // the hint named metadata that is not there
	}
	v.hint = hint
	return v, err
}

// readViewFrom reads the newest metadata numbered n or above (n = 0:
// listing the metadata first).
func readViewFrom(ctx context.Context, b blob.Bucket, n int) (view, error) {
	if n == 0 {
		for o, err := range blob.List(ctx, b, MetadataDir, 0) {
			if err != nil {
				return view{}, err
			}
			if k, ok := ParseMetadataKey(o.Key); ok && k > n {
				n = k
			}
		}
		if n == 0 {
			return view{}, nil
		}
	}
	for {
		_, err := b.Attributes(ctx, MetadataKey(n+1))
		if errors.Is(err, blob.ErrNotFound) {
			break
		}
		if err != nil {
			return view{}, err
		}
		n++
	}
	raw, err := b.Get(ctx, MetadataKey(n))
	if err != nil {
		return view{}, fmt.Errorf("lakehouse: reading %s: %w", MetadataKey(n), err)
	}
	meta, err := itable.ParseMetadataBytes(raw)
	if err != nil {
		return view{}, fmt.Errorf("lakehouse: %s is not Iceberg metadata (delete %s to start the view afresh): %w", MetadataKey(n), table.IcebergDir, err)
	}
	return view{n: n, meta: meta}, nil
}

// chooseVersions returns the versions to describe, ascending: those
// garbage collection keeps (see compactor.PlanGC) up to target.
func chooseVersions(listed []table.VersionInfo, tags []table.Tag, boundary, target uint64, o *Options, now time.Time) []uint64 {
	tagged := map[uint64]bool{}
	for _, t := range tags {
		tagged[t.Version] = true
	}
	var out []uint64
	for i, v := range listed { // newest first
		if v.Version > target {
			continue
		}
		kept := v.Version == target || i < o.KeepVersions || now.Sub(v.Time) < o.RetainFor
		if (kept && v.Version > boundary) || tagged[v.Version] {
			out = append(out, v.Version)
		}
	}
	slices.Sort(out)
	return out
}

func exportOnce(ctx context.Context, b blob.Bucket, o *Options, now time.Time) (Result, bool, error) {
	var res Result
	// What decides the export, read together.
	var cur view
	var boundary uint64
	var listed []table.VersionInfo
	var tags []table.Tag
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { cur, err = readView(gctx, b); return err })
	g.Go(func() (err error) { boundary, err = table.GCBoundary(gctx, b); return err })
	g.Go(func() (err error) {
		if listed, err = table.Versions(gctx, b, 0, false); err != nil {
			return fmt.Errorf("lakehouse: listing versions: %w", err)
		}
		return nil
	})
	g.Go(func() (err error) { tags, err = table.Tags(gctx, b); return err })
	if err := g.Wait(); err != nil {
		return res, false, err
	}
	target := o.Version
	if target == 0 {
		target = listed[0].Version
	} else if !slices.ContainsFunc(listed, func(v table.VersionInfo) bool { return v.Version == target }) {
		return res, false, fmt.Errorf("lakehouse: version %d: %w (the newest is %d)", target, table.ErrVersionNotFound, listed[0].Version)
	}
	want := chooseVersions(listed, tags, boundary, target, o, now)
	have := cur.versions()
	newest := uint64(0)
	if len(have) > 0 {
		newest = have[len(have)-1]
	}
	if newest > target {
		return res, false, fmt.Errorf("%w: the view already describes version %d, newer than %d; an export never moves the main branch back", ErrUnsupported, newest, target)
	}
	var add, keep, drop []uint64
	for _, v := range want {
		switch {
		case slices.Contains(have, v):
			keep = append(keep, v)
		case v > newest:
			add = append(add, v)
		}
		// A version older than the view's newest that the view lacks (a
		// tag made later on an old version) cannot be added: snapshots'
		// sequence numbers only grow.
	}
	for _, v := range have {
		// The newest stays the main branch until a newer one is added.
		if !slices.Contains(want, v) && (v != newest || len(add) > 0) {
			drop = append(drop, v)
		}
	}
	refs := wantedRefs(tags, append(slices.Clone(keep), add...))
	if len(add) == 0 && len(drop) == 0 && cur.meta != nil && sameRefs(cur.meta, refs, newest) {
		if cur.hint != cur.n { // an export that died between its metadata and the hint
			if err := writeHint(ctx, b, cur.n); err != nil {
				return res, false, err
			}
		}
		res.MetadataKey, res.Current = MetadataKey(cur.n), newest
		res.MetadataLocation = o.Location + "/" + res.MetadataKey
		res.Snapshots = have
		return res, false, nil
	}

	ex := &exporter{b: b, loc: o.Location, o: o, entries: map[string][]iceberg.ManifestEntry{}}
	ex.puts, ex.putCtx = errgroup.WithContext(ctx)
	ex.puts.SetLimit(concurrency)
	defer func() { _ = ex.puts.Wait() }()
	var bld *itable.MetadataBuilder
	var err error
	if cur.meta != nil {
		if bld, err = itable.MetadataBuilderFromBase(cur.meta, o.Location+"/"+MetadataKey(cur.n)); err != nil {
			return res, false, err
		}
		if err := ex.startFrom(ctx, cur.meta, newest); err != nil {
			return res, false, err
		}
	}
	ms := &prefetched{}
	for i, v := range add {
		m, err := ms.get(ctx, b, add, i)
		if err != nil {
			return res, false, fmt.Errorf("lakehouse: reading version %d: %w", v, err)
		}
		if bld == nil {
			if bld, err = newBuilder(m, o.Location); err != nil {
				return res, false, err
			}
		}
		sc, err := ex.schemaFor(bld, m)
		if err != nil {
			return res, false, fmt.Errorf("lakehouse: version %d: %w", v, err)
		}
		snap, err := ex.snapshot(ctx, m, sc)
		if err != nil {
			return res, false, fmt.Errorf("lakehouse: version %d: %w", v, err)
		}
		if err := bld.AddSnapshot(snap); err != nil {
			return res, false, fmt.Errorf("lakehouse: version %d: %w", v, err)
		}
	}
	if bld == nil {
		return res, false, fmt.Errorf("lakehouse: nothing to describe: %w", table.ErrNotFound)
	}
	main := newest
	if len(add) > 0 {
		main = add[len(add)-1]
	}
	if err := bld.SetSnapshotRef(itable.MainBranch, int64(main), itable.BranchRef); err != nil {
		return res, false, err
	}
	if cur.meta != nil {
		for name := range cur.meta.Refs() {
			if name != itable.MainBranch {
				if _, ok := refs[name]; !ok {
					if err := bld.RemoveSnapshotRef(name); err != nil {
						return res, false, err
					}
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(refs)) {
		if err := bld.SetSnapshotRef(name, int64(refs[name]), itable.TagRef); err != nil {
			return res, false, err
		}
	}
	// Every object the snapshots name is in place before the metadata.
	if err := ex.puts.Wait(); err != nil {
		return res, false, err
	}
	if len(drop) > 0 {
		ids := make([]int64, len(drop))
		for i, v := range drop {
			ids[i] = int64(v)
		}
		if err := bld.RemoveSnapshots(ids, false); err != nil {
			return res, false, err
		}
	}
	mapping, err := json.Marshal(bld.CurrentSchema().NameMapping())
	if err != nil {
		return res, false, err
	}
	if err := bld.SetProperties(iceberg.Properties{itable.DefaultNameMappingKey: string(mapping)}); err != nil {
		return res, false, err
	}
	bld.TrimMetadataLogs(0)
	meta, err := bld.Build()
	if err != nil {
		return res, false, fmt.Errorf("lakehouse: building metadata: %w", err)
	}
	raw, err := json.Marshal(meta)
	if err != nil {
		return res, false, err
	}
	key := MetadataKey(cur.n + 1)
	if err := b.PutIfAbsent(ctx, key, raw); errors.Is(err, blob.ErrExists) {
		return res, true, nil // another export won: start from its view
	} else if err != nil {
		return res, false, fmt.Errorf("lakehouse: writing %s: %w", key, err)
	}
	// A collection that read the view before this metadata landed may be
	// collecting a version this export added, if its boundary covers it;
	// such a version would no longer be chosen: export again without it.
	var after uint64
	g, gctx = errgroup.WithContext(ctx)
	g.Go(func() error { return writeHint(gctx, b, cur.n+1) })
	g.Go(func() (err error) { after, err = table.GCBoundary(gctx, b); return err })
	if err := g.Wait(); err != nil {
		return res, false, err
	}
	if after != boundary && len(add) > 0 && add[0] <= after {
		return res, true, nil
	}
	res.MetadataKey, res.MetadataLocation, res.Written = key, o.Location+"/"+key, true
	res.Current, res.Added, res.Dropped = main, add, drop
	for _, s := range meta.Snapshots() {
		res.Snapshots = append(res.Snapshots, versionOf(s))
	}
	slices.Sort(res.Snapshots)
	return res, false, nil
}

// writeHint points readers at metadata n.
func writeHint(ctx context.Context, b blob.Bucket, n int) error {
	if err := b.Put(ctx, HintKey, strings.NewReader(strconv.Itoa(n))); err != nil {
		return fmt.Errorf("lakehouse: writing %s: %w", HintKey, err)
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
func newBuilder(m *table.Manifest, loc string) (*itable.MetadataBuilder, error) {
	sc, err := icebergSchema(m.Schema(), nil, 0)
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

// exporter builds snapshots one version after another, each from the one
// before.
type exporter struct {
	b   blob.Bucket
	loc string
	o   *Options

	base   *table.Manifest // the version the last snapshot describes; nil: none
	baseID int64
	// baseData and baseDels map the base's data and delete files' paths
	// to their fragments (files).
	baseData, baseDels map[string]*table.Fragment
	lastTS             int64 // the last snapshot's timestamp-ms
	manifests          []iceberg.ManifestFile
	// entries caches manifests' live entries by path (read or written in
	// this export).
	entries map[string][]iceberg.ManifestEntry
	// puts creates the manifests and manifest lists in the background;
	// the metadata is written only once they all are.
	puts   *errgroup.Group
	putCtx context.Context
}

// concurrency bounds the requests an export has in flight.
const concurrency = 16

// create creates an object of the view in the background.
func (ex *exporter) create(key string, data []byte) {
	ex.puts.Go(func() error {
		if err := ex.b.PutIfAbsent(ex.putCtx, key, data); err != nil {
			return fmt.Errorf("lakehouse: writing %s: %w", key, err)
		}
		return nil
	})
}

// prefetched reads the manifests of the versions an export adds,
// concurrency at a time, ahead of their use: memory holds one window.
type prefetched struct {
	from int
	ms   []*table.Manifest
}

func (p *prefetched) get(ctx context.Context, b blob.Bucket, versions []uint64, i int) (*table.Manifest, error) {
	if i < p.from || i >= p.from+len(p.ms) {
		p.from = i
		p.ms = make([]*table.Manifest, min(concurrency, len(versions)-i))
		g, gctx := errgroup.WithContext(ctx)
		for j := range p.ms {
			g.Go(func() (err error) {
				p.ms[j], err = table.ReadManifest(gctx, b, versions[i+j])
				return err
			})
		}
		if err := g.Wait(); err != nil {
			p.ms = nil
			return nil, err
		}
	}
	return p.ms[i-p.from], nil
}

// startFrom takes the view's newest snapshot as the base of the next.
func (ex *exporter) startFrom(ctx context.Context, meta itable.Metadata, newest uint64) error {
	snap := meta.SnapshotByID(int64(newest))
	if snap == nil {
		return nil
	}
	ex.lastTS = max(snap.TimestampMs, meta.LastUpdatedMillis())
	var m *table.Manifest
	var data []byte
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { m, err = table.ReadManifest(gctx, ex.b, newest); return err })
	g.Go(func() (err error) { data, err = ex.get(gctx, snap.ManifestList); return err })
	if err := g.Wait(); errors.Is(err, table.ErrVersionNotFound) || errors.Is(err, blob.ErrNotFound) {
		// The version or the snapshot's manifest list is gone (collected,
		// or lost): the next snapshot is built whole, without a base.
		return nil
	} else if err != nil {
		return err
	}
	files, err := iceberg.ReadManifestList(bytes.NewReader(data))
	if err != nil {
		return damagedList(snap.ManifestList, err)
	}
	ex.base, ex.baseID, ex.manifests = m, snap.SnapshotID, files
	ex.baseData, ex.baseDels = ex.files(m)
	return nil
}

// damagedList is the error of a manifest list that does not parse: the
// view cannot go on from it (nor garbage collection know what it holds on
// to) until it is started afresh; the table's own data is not affected.
func damagedList(list string, err error) error {
	return fmt.Errorf("lakehouse: manifest list %s is not Iceberg Avro (delete %s to start the view afresh): %w", list, table.IcebergDir, err)
}

// get reads an object of the view by its full location.
func (ex *exporter) get(ctx context.Context, location string) ([]byte, error) {
	key, err := objectKey(ex.loc, location)
	if err != nil {
		return nil, err
	}
	return ex.b.Get(ctx, key)
}

// schemaFor returns the view's schema for a version's schema, adding one
// when it changed.
func (ex *exporter) schemaFor(bld *itable.MetadataBuilder, m *table.Manifest) (*iceberg.Schema, error) {
	cur := bld.CurrentSchema()
	want, err := icebergSchema(m.Schema(), cur, bld.LastColumnID())
	if err != nil {
		return nil, err
	}
	if cur != nil && cur.Equals(want) {
		return cur, nil
	}
	if err := bld.AddSchema(want); err != nil {
		return nil, err
	}
	if err := bld.SetCurrentSchemaID(-1); err != nil {
		return nil, err
	}
	return bld.CurrentSchema(), nil
}

// snapshot writes what version m's snapshot needs — new delete files, new
// manifests, its manifest list — and returns it.
func (ex *exporter) snapshot(ctx context.Context, m *table.Manifest, sc *iceberg.Schema) (*itable.Snapshot, error) {
	id := int64(m.Version)
	// What the version holds, and what changed since the base.
	data, dels := ex.files(m)
	baseData, baseDels := ex.baseData, ex.baseDels
	removedData, removedDels := gone(baseData, data), gone(baseDels, dels)
	var addedData, addedDels []iceberg.DataFile
	for _, p := range slices.Sorted(maps.Keys(data)) {
		if baseData[p] == nil {
			df, err := dataFile(ex.loc, data[p], sc, m.Schema())
			if err != nil {
				return nil, err
			}
			addedData = append(addedData, df)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(dels)) {
		if baseDels[p] == nil {
			df, err := writeDeleteFile(ctx, ex.b, ex.loc, dels[p])
			if err != nil {
				return nil, err
			}
			addedDels = append(addedDels, df)
		}
	}
	// Per content: the base's manifests, rewritten where they hold removed
	// files, and one new manifest for the new files; all merged into one
	// when they would be more than MaxManifests.
	var out []iceberg.ManifestFile
	for _, c := range []struct {
		content iceberg.ManifestContent
		added   []iceberg.DataFile
		removed map[string]bool
	}{{iceberg.ManifestContentData, addedData, removedData}, {iceberg.ManifestContentDeletes, addedDels, removedDels}} {
		var keep []iceberg.ManifestFile
		var carried []iceberg.ManifestEntry // entries of rewritten manifests
		for _, mf := range ex.manifests {
			if mf.ManifestContent() != c.content {
				continue
			}
			if len(c.removed) == 0 {
				keep = append(keep, mf)
				continue
			}
			entries, err := ex.read(ctx, mf)
			if err != nil {
				return nil, err
			}
			left := slices.DeleteFunc(slices.Clone(entries), func(e iceberg.ManifestEntry) bool { return c.removed[e.DataFile().FilePath()] })
			if len(left) == len(entries) {
				keep = append(keep, mf)
			} else {
				carried = append(carried, left...)
			}
		}
		if len(keep)+2 > ex.o.MaxManifests {
			for _, mf := range keep {
				entries, err := ex.read(ctx, mf)
				if err != nil {
					return nil, err
				}
				carried = append(carried, entries...)
			}
			keep = nil
		}
		out = append(out, keep...)
		if len(carried) > 0 || len(c.added) > 0 {
			nm, err := ex.write(ctx, c.content, sc, id, c.added, carried)
			if err != nil {
				return nil, err
			}
			out = append(out, nm)
		}
	}
	// The manifest list, and the snapshot.
	var parent *int64
	if ex.base != nil {
		p := ex.baseID
		parent = &p
	}
	seq := id
	var buf bytes.Buffer
	if err := iceberg.WriteManifestList(2, &buf, id, parent, &seq, 0, out); err != nil {
		return nil, err
	}
	listKey := manifestListKey(m.Version)
	ex.create(listKey, buf.Bytes())
	// The list gave the new manifests this snapshot's sequence number; the
	// next snapshot reuses them as the list describes them.
	listed, err := iceberg.ReadManifestList(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return nil, err
	}
	op := itable.OpAppend
	switch {
	case m.Transaction.Kind == table.KindOverwrite:
		op = itable.OpOverwrite
	case len(removedData)+len(removedDels) > 0 && len(addedData) > 0:
		op = itable.OpReplace
	case len(addedDels)+len(removedData)+len(removedDels) > 0:
		op = itable.OpDelete
	}
	// Iceberg wants snapshot times in order; versions are, but their
	// times come from the writers' clocks. A time behind the previous
	// snapshot's is raised to it; the summary keeps the version's own.
	ts := max(m.Timestamp.UnixMilli(), ex.lastTS)
	ex.lastTS = ts
	schemaID := sc.ID
	snap := &itable.Snapshot{
		SnapshotID:       id,
		ParentSnapshotID: parent,
		SequenceNumber:   seq,
		TimestampMs:      ts,
		ManifestList:     ex.loc + "/" + listKey,
		SchemaID:         &schemaID,
		Summary: &itable.Summary{Operation: op, Properties: iceberg.Properties{
			PropVersion:          strconv.FormatUint(m.Version, 10),
			PropKind:             string(m.Transaction.Kind),
			PropCommitID:         m.Transaction.CommitID,
			PropTimestamp:        m.Timestamp.UTC().Format(time.RFC3339Nano),
			"added-data-files":   strconv.Itoa(len(addedData)),
			"added-delete-files": strconv.Itoa(len(addedDels)),
			"total-records":      strconv.FormatInt(m.Rows(), 10),
			"total-data-files":   strconv.Itoa(len(m.Fragments)),
		}},
	}
	ex.base, ex.baseID, ex.manifests = m, id, listed
	ex.baseData, ex.baseDels = data, dels
	return snap, nil
}

// gone returns the paths of before that now lacks.
func gone(before, now map[string]*table.Fragment) map[string]bool {
	out := map[string]bool{}
	for p := range before {
		if now[p] == nil {
			out[p] = true
		}
	}
	return out
}

// files maps the full paths of a version's data files and delete files to
// their fragments.
func (ex *exporter) files(m *table.Manifest) (data, dels map[string]*table.Fragment) {
	data, dels = map[string]*table.Fragment{}, map[string]*table.Fragment{}
	if m == nil {
		return data, dels
	}
	for i := range m.Fragments {
		f := &m.Fragments[i]
		data[ex.loc+"/"+f.Key] = f
		if f.Deletion != nil {
			dels[ex.loc+"/"+DeleteFileKey(f.Deletion.Key)] = f
		}
	}
	return data, dels
}

// read returns a manifest's live entries, with the sequence numbers they
// inherit from the list (cached).
func (ex *exporter) read(ctx context.Context, mf iceberg.ManifestFile) ([]iceberg.ManifestEntry, error) {
	if e, ok := ex.entries[mf.FilePath()]; ok {
		return e, nil
	}
	data, err := ex.get(ctx, mf.FilePath())
	if err != nil {
		return nil, fmt.Errorf("lakehouse: reading manifest %s: %w", mf.FilePath(), err)
	}
	entries, err := iceberg.ReadManifest(mf, bytes.NewReader(data), true)
	if err != nil {
		return nil, fmt.Errorf("lakehouse: manifest %s: %w", mf.FilePath(), err)
	}
	ex.entries[mf.FilePath()] = entries
	return entries, nil
}

// write writes a manifest of content: files this snapshot adds, and
// entries carried over from manifests it replaces (keeping the snapshot
// and sequence numbers that added them).
func (ex *exporter) write(ctx context.Context, content iceberg.ManifestContent, sc *iceberg.Schema, snapshotID int64, added []iceberg.DataFile, carried []iceberg.ManifestEntry) (iceberg.ManifestFile, error) {
	var buf bytes.Buffer
	w, err := iceberg.NewManifestWriter(2, &buf, *iceberg.UnpartitionedSpec, sc, snapshotID, iceberg.WithManifestWriterContent(content))
	if err != nil {
		return nil, err
	}
	// What a later snapshot reading this manifest would find: the added
	// entries inherit this snapshot's sequence number (= its id) from the
	// list.
	entries := make([]iceberg.ManifestEntry, 0, len(carried)+len(added))
	for _, e := range carried {
		sid, seq := e.SnapshotID(), e.SequenceNum()
		ne := iceberg.NewManifestEntry(iceberg.EntryStatusEXISTING, &sid, &seq, e.FileSequenceNum(), e.DataFile())
		if err := w.Existing(ne); err != nil {
			return nil, err
		}
		entries = append(entries, ne)
	}
	for _, df := range added {
		if err := w.Add(iceberg.NewManifestEntry(iceberg.EntryStatusADDED, &snapshotID, nil, nil, df)); err != nil {
			return nil, err
		}
		seq := snapshotID
		entries = append(entries, iceberg.NewManifestEntry(iceberg.EntryStatusADDED, &snapshotID, &seq, &seq, df))
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	key := manifestKey()
	mf, err := w.ToManifestFile(ex.loc+"/"+key, int64(buf.Len()))
	if err != nil {
		return nil, err
	}
	ex.create(key, buf.Bytes())
	ex.entries[mf.FilePath()] = entries
	return mf, nil
}
