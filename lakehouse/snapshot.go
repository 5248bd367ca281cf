package lakehouse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	itable "github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// EnginesDir is where engines that append through Strata's Iceberg
// catalog write (layout.EnginesDir).
const EnginesDir = layout.EnginesDir

// Summary properties each snapshot carries.
const (
	PropVersion   = "strata.version"
	PropKind      = "strata.operation"
	PropCommitID  = "strata.commit-id"
	PropTableID   = "strata.table-id"
	PropTimestamp = "strata.timestamp"
)

// exporter builds snapshots one version after another, each from the one
// before.
type exporter struct {
	// ids: stored name to field id, of every column the view has known;
	// schema: the Arrow schema of the newest version exported.
	ids    map[string]int
	schema *arrow.Schema
	b      blob.Bucket
	loc    string
	o      *Options

	base   *format.Manifest // the version the last snapshot describes; nil: none
	baseID int64
	// baseData and baseDels map the base's data and delete files' paths
	// to their fragments (files).
	baseData, baseDels map[string]*format.Fragment
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

// prefetched reads the versions an export adds, in order: their
// transactions concurrency at a time, ahead of their use, and each
// version's manifest rebuilt from the one before and its transaction
// (commit.Replay, which checks the result against what the commit
// recorded), so that an export of n versions decodes each version's
// transaction rather than n whole manifests (on a table of many fragments,
// each as long as its fragment list). A version that does not follow the
// one before, or whose replay fails its check, is read whole. Memory holds
// one window of transactions and two manifests.
type prefetched struct {
	from int
	txns []*format.Transaction
	last *format.Manifest // the manifest get returned last (or the view's base)
}

func (p *prefetched) get(ctx context.Context, b blob.Bucket, versions []uint64, i int) (*format.Manifest, error) {
	if i < p.from || i >= p.from+len(p.txns) {
		p.from = i
		p.txns = make([]*format.Transaction, min(concurrency, len(versions)-i))
		g, gctx := errgroup.WithContext(ctx)
		for j := range p.txns {
			g.Go(func() (err error) {
				p.txns[j], err = table.ReadTransaction(gctx, b, versions[i+j])
				return err
			})
		}
		if err := g.Wait(); err != nil {
			p.txns = nil
			return nil, err
		}
	}
	v, txn := versions[i], p.txns[i-p.from]
	// A transaction of an older build has no commit time, which the
	// snapshot's timestamp is: its version is read whole.
	if p.last != nil && p.last.Version+1 == v && !txn.Committed.IsZero() {
		if m, err := commit.Replay(p.last, txn); err == nil {
			p.last = m
			return m, nil
		}
	}
	m, err := table.ReadManifest(ctx, b, v)
	if err != nil {
		return nil, err
	}
	p.last = m
	return m, nil
}

// startFrom takes the view's newest snapshot as the base of the next.
func (ex *exporter) startFrom(ctx context.Context, meta itable.Metadata, newest uint64) error {
	snap := meta.SnapshotByID(int64(newest))
	if snap == nil {
		return nil
	}
	ex.lastTS = max(snap.TimestampMs, meta.LastUpdatedMillis())
	var m *format.Manifest
	var data []byte
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { m, err = table.ReadManifest(gctx, ex.b, newest); return err })
	g.Go(func() (err error) { data, err = ex.get(gctx, snap.ManifestList); return err })
	if err := g.Wait(); errors.Is(err, format.ErrVersionNotFound) || errors.Is(err, blob.ErrNotFound) {
		// The version or the snapshot's manifest list is gone (collected,
		// or lost): the next snapshot is built whole, without a base.
		return nil
	} else if err != nil {
		return err
	}
	files, err := iceberg.ReadManifestList(bytes.NewReader(data))
	if err != nil {
		return layout.DamagedList(snap.ManifestList, err)
	}
	ex.base, ex.baseID, ex.manifests = m, snap.SnapshotID, files
	ex.baseData, ex.baseDels = ex.files(m)
	return nil
}

// get reads an object of the view by its full location.
func (ex *exporter) get(ctx context.Context, location string) ([]byte, error) {
	key, err := layout.ObjectKey(ex.loc, location)
	if err != nil {
		return nil, err
	}
	return ex.b.Get(ctx, key)
}

// schemaFor returns the view's schema for a version's schema, adding one
// when it changed.
func (ex *exporter) schemaFor(bld *itable.MetadataBuilder, m *format.Manifest) (*iceberg.Schema, error) {
	cur := bld.CurrentSchema()
	if ex.ids == nil {
		ex.ids = storedIDs(bld.NameMapping())
	}
	want, err := icebergSchema(m.Schema(), cur, bld.LastColumnID(), ex.ids)
	if err != nil {
		return nil, err
	}
	ex.schema = m.Schema()
	for i, f := range want.Fields() {
		ex.ids[evolve.StoredName(m.Schema().Field(i))] = f.ID
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

// sortOrderFor makes the view's default sort order the table's cluster
// key as of m, each column ascending with nulls last (the order
// compaction sorts fragments in), or unsorted when it has none. An order
// the view had before is taken again by its id.
func sortOrderFor(bld *itable.MetadataBuilder, m *format.Manifest, sc *iceberg.Schema) error {
	order := itable.UnsortedSortOrder
	if names, _, ok := evolve.ClusterColumns(m.Schema(), m.ClusterBy); ok {
		fields := make([]itable.SortField, len(names))
		for i, name := range names {
			f, found := sc.FindFieldByName(name)
			if !found {
				return fmt.Errorf("the cluster key's column %q is not in the view's schema", name)
			}
			fields[i] = itable.SortField{SourceIDs: []int{f.ID}, Transform: iceberg.IdentityTransform{}, Direction: itable.SortASC, NullOrder: itable.NullsLast}
		}
		var err error
		if order, err = itable.NewSortOrder(1, fields); err != nil {
			return err
		}
	}
	if err := bld.AddSortOrder(&order); err != nil {
		return err
	}
	return bld.SetDefaultSortOrderID(-1)
}

// snapshot writes what version m's snapshot needs — new delete files, new
// manifests, its manifest list — and returns it.
func (ex *exporter) snapshot(ctx context.Context, m *format.Manifest, sc *iceberg.Schema) (*itable.Snapshot, error) {
	id := int64(m.Version)
	// What the version holds, and what changed since the base.
	data, dels := ex.files(m)
	removedData, removedDels := gone(ex.baseData, data), gone(ex.baseDels, dels)
	addedData, addedDels, err := ex.newFiles(ctx, m, sc, data, dels)
	if err != nil {
		return nil, err
	}
	// Per content: the base's manifests, rewritten where they hold removed
	// files, and one new manifest for the new files.
	var out []iceberg.ManifestFile
	for _, c := range []contentChange{{iceberg.ManifestContentData, addedData, removedData}, {iceberg.ManifestContentDeletes, addedDels, removedDels}} {
		mfs, err := ex.manifestsOf(ctx, c, sc, id)
		if err != nil {
			return nil, err
		}
		out = append(out, mfs...)
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
	listKey := layout.ManifestListKey(m.Version)
	ex.create(listKey, buf.Bytes())
	// The list gave the new manifests this snapshot's sequence number; the
	// next snapshot reuses them as the list describes them.
	listed, err := iceberg.ReadManifestList(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return nil, err
	}
	op := itable.OpAppend
	switch {
	case m.Transaction.Kind == format.KindOverwrite, (m.Transaction.Kind == format.KindUpsert || m.Transaction.Kind == format.KindUpdate || m.Transaction.Kind == format.KindMerge) && len(addedDels) > 0:
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

// newFiles returns the data files and delete files of version m (data,
// dels) that the base lacks, writing the delete files.
func (ex *exporter) newFiles(ctx context.Context, m *format.Manifest, sc *iceberg.Schema, data, dels map[string]*format.Fragment) (addedData, addedDels []iceberg.DataFile, err error) {
	for _, p := range slices.Sorted(maps.Keys(data)) {
		if ex.baseData[p] == nil {
			df, err := dataFile(ex.loc, data[p], sc, m.Schema())
			if err != nil {
				return nil, nil, err
			}
			addedData = append(addedData, df)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(dels)) {
		if ex.baseDels[p] == nil {
			df, err := writeDeleteFile(ctx, ex.b, ex.loc, dels[p])
			if err != nil {
				return nil, nil, err
			}
			addedDels = append(addedDels, df)
		}
	}
	return addedData, addedDels, nil
}

// contentChange is what a snapshot changes of one content (data files or
// delete files).
type contentChange struct {
	content iceberg.ManifestContent
	added   []iceberg.DataFile
	removed map[string]bool
}

// manifestsOf returns the manifests of c's content in snapshot id: the
// base's, rewritten where they hold removed files, and one new manifest
// for the new files; all merged into one when they would be more than
// MaxManifests.
func (ex *exporter) manifestsOf(ctx context.Context, c contentChange, sc *iceberg.Schema, id int64) ([]iceberg.ManifestFile, error) {
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
	if len(carried) > 0 || len(c.added) > 0 {
		nm, err := ex.write(ctx, c.content, sc, id, c.added, carried)
		if err != nil {
			return nil, err
		}
		keep = append(keep, nm)
	}
	return keep, nil
}

// gone returns the paths of before that now lacks.
func gone(before, now map[string]*format.Fragment) map[string]bool {
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
func (ex *exporter) files(m *format.Manifest) (data, dels map[string]*format.Fragment) {
	data, dels = map[string]*format.Fragment{}, map[string]*format.Fragment{}
	if m == nil {
		return data, dels
	}
	for i := range m.Fragments {
		f := &m.Fragments[i]
		data[ex.loc+"/"+f.Key] = f
		if f.Deletion != nil {
			dels[ex.loc+"/"+layout.DeleteFileKey(f.Deletion.Key)] = f
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
	key := layout.ManifestKey()
	mf, err := w.ToManifestFile(ex.loc+"/"+key, int64(buf.Len()))
	if err != nil {
		return nil, err
	}
	ex.create(key, buf.Bytes())
	ex.entries[mf.FilePath()] = entries
	return mf, nil
}
