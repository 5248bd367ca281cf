package lakehouse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/apache/iceberg-go"
	itable "github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

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

// LocationError is an export at a location other than the one the
// existing view names every file under: readers resolve the view's files
// at View, so an export at Export would leave them where readers do not
// look (or, with nothing new, say the view is up to date while every file
// it names is out of reach).
type LocationError struct {
	View, Export string
}

func (e *LocationError) Error() string {
	return fmt.Sprintf("lakehouse: the Iceberg view names its files under %s, not under %s, the location of this export: "+
		"export with the view's location (--location %s), or, if %s is where readers find the table, delete %s and export again to write the view afresh there",
		e.View, e.Export, e.View, e.Export, format.IcebergDir)
}

func (e *LocationError) Unwrap() error { return layout.ErrLocationMismatch }

// checkLocation refuses an export at loc over a view written for another
// location, whether or not there is anything new to export.
func checkLocation(cur view, loc string) error {
	if cur.meta == nil || cur.meta.Location() == loc {
		return nil
	}
	return &LocationError{View: cur.meta.Location(), Export: loc}
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

// exportOnce makes one attempt at Export; retry is true when the view or
// the garbage collection boundary changed under it.
func exportOnce(ctx context.Context, b blob.Bucket, o *Options, now time.Time) (Result, bool, error) {
	var res Result
	st, err := readState(ctx, b)
	if err != nil {
		return res, false, err
	}
	if st.cur.meta != nil {
		same, err := viewOfThisTable(ctx, b, st)
		if err != nil {
			return res, false, err
		}
		if !same {
			st.cur.meta = nil // the view of a table dropped here: started afresh, numbered on
		}
	}
	p, err := planExport(st, o, now)
	if err != nil {
		return res, false, err
	}
	cur := st.cur
	if err := checkLocation(cur, o.Location); err != nil {
		return res, false, err
	}
	if len(p.add) == 0 && len(p.drop) == 0 && cur.meta != nil && sameRefs(cur.meta, p.refs, p.newest) && namesEnginesPaths(cur.meta, o.Location) {
		if cur.hint != cur.n { // an export that died between its metadata and the hint
			if err := writeHint(ctx, b, cur.n); err != nil {
				return res, false, err
			}
		}
		res.MetadataKey, res.Current = layout.MetadataKey(cur.n), p.newest
		res.MetadataLocation = o.Location + "/" + res.MetadataKey
		res.Snapshots = p.have
		return res, false, nil
	}
	meta, err := buildView(ctx, b, o, cur, p)
	if err != nil {
		return res, false, err
	}
	raw, err := json.Marshal(meta)
	if err != nil {
		return res, false, err
	}
	key := layout.MetadataKey(cur.n + 1)
	if err := b.PutIfAbsent(ctx, key, raw); errors.Is(err, blob.ErrExists) {
		return res, true, nil // another export won: start from its view
	} else if err != nil {
		return res, false, fmt.Errorf("lakehouse: writing %s: %w", key, err)
	}
	// A collection that read the view before this metadata landed may be
	// collecting a version this export added, if its boundary covers it;
	// such a version would no longer be chosen: export again without it.
	var after uint64
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return writeHint(gctx, b, cur.n+1) })
	g.Go(func() (err error) { after, err = table.GCBoundary(gctx, b); return err })
	if err := g.Wait(); err != nil {
		return res, false, err
	}
	if after != st.boundary && len(p.add) > 0 && p.add[0] <= after {
		return res, true, nil
	}
	res.MetadataKey, res.MetadataLocation, res.Written = key, o.Location+"/"+key, true
	res.Current, res.Added, res.Dropped = p.main(), p.add, p.drop
	for _, s := range meta.Snapshots() {
		res.Snapshots = append(res.Snapshots, versionOf(s))
	}
	slices.Sort(res.Snapshots)
	return res, false, nil
}

// exportState is what decides an export, read together.
type exportState struct {
	cur      view
	boundary uint64 // garbage collection's
	listed   []table.VersionInfo
	tags     []table.Tag
}

func readState(ctx context.Context, b blob.Bucket) (exportState, error) {
	var st exportState
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { st.cur, err = readView(gctx, b); return err })
	g.Go(func() (err error) { st.boundary, err = table.GCBoundary(gctx, b); return err })
	g.Go(func() (err error) {
		if st.listed, err = table.Versions(gctx, b, 0, false); err != nil {
			return fmt.Errorf("lakehouse: listing versions: %w", err)
		}
		return nil
	})
	g.Go(func() (err error) { st.tags, err = table.Tags(gctx, b); return err })
	return st, g.Wait()
}

// exportPlan is what an export changes in the view.
type exportPlan struct {
	have            []uint64 // the versions the view describes
	newest          uint64   // the newest of them (0: none)
	add, keep, drop []uint64
	refs            map[string]uint64 // the tags the view is to hold
}

// main is the version the main branch is to name.
func (p exportPlan) main() uint64 {
	if len(p.add) > 0 {
		return p.add[len(p.add)-1]
	}
	return p.newest
}

func planExport(st exportState, o *Options, now time.Time) (exportPlan, error) {
	var p exportPlan
	target := o.Version
	if target == 0 {
		target = st.listed[0].Version
	} else if !slices.ContainsFunc(st.listed, func(v table.VersionInfo) bool { return v.Version == target }) {
		return p, fmt.Errorf("lakehouse: version %d: %w (the newest is %d)", target, format.ErrVersionNotFound, st.listed[0].Version)
	}
	want := chooseVersions(st.listed, st.tags, st.boundary, target, o, now)
	p.have = st.cur.versions()
	if len(p.have) > 0 {
		p.newest = p.have[len(p.have)-1]
	}
	if p.newest > target {
		return p, fmt.Errorf("%w: the view already describes version %d, newer than %d; an export never moves the main branch back", layout.ErrUnsupported, p.newest, target)
	}
	for _, v := range want {
		switch {
		case slices.Contains(p.have, v):
			p.keep = append(p.keep, v)
		case v > p.newest:
			p.add = append(p.add, v)
		}
		// A version older than the view's newest that the view lacks (a
		// tag made later on an old version) cannot be added: snapshots'
		// sequence numbers only grow.
	}
	for _, v := range p.have {
		// The newest stays the main branch until a newer one is added.
		if !slices.Contains(want, v) && (v != p.newest || len(p.add) > 0) {
			p.drop = append(p.drop, v)
		}
	}
	p.refs = wantedRefs(st.tags, append(slices.Clone(p.keep), p.add...))
	return p, nil
}

// buildView writes the objects of the snapshots p adds and returns the
// view's next metadata.
func buildView(ctx context.Context, b blob.Bucket, o *Options, cur view, p exportPlan) (itable.Metadata, error) {
	ex := &exporter{b: b, loc: o.Location, o: o, entries: map[string][]iceberg.ManifestEntry{}}
	ex.puts, ex.putCtx = errgroup.WithContext(ctx)
	ex.puts.SetLimit(concurrency)
	defer func() { _ = ex.puts.Wait() }()
	bld, err := ex.addSnapshots(ctx, cur, p)
	if err != nil {
		return nil, err
	}
	if err := setRefs(bld, cur, p); err != nil {
		return nil, err
	}
	// Every object the snapshots name is in place before the metadata.
	if err := ex.puts.Wait(); err != nil {
		return nil, err
	}
	if len(p.drop) > 0 {
		ids := make([]int64, len(p.drop))
		for i, v := range p.drop {
			ids[i] = int64(v)
		}
		if err := bld.RemoveSnapshots(ids, false); err != nil {
			return nil, err
		}
	}
	// The name mapping follows the newest version exported; with none
	// exported now (a tag, snapshots dropped), the view's stays as it is.
	if ex.schema != nil || bld.NameMapping() == nil {
		nm := bld.CurrentSchema().NameMapping()
		if ex.schema != nil && ex.schema.NumFields() == len(bld.CurrentSchema().Fields()) {
			nm = nameMapping(bld.CurrentSchema(), ex.schema, ex.ids)
		}
		mapping, err := json.Marshal(nm)
		if err != nil {
			return nil, err
		}
		if err := bld.SetProperties(iceberg.Properties{itable.DefaultNameMappingKey: string(mapping)}); err != nil {
			return nil, err
		}
	}
	if err := bld.SetProperties(enginesPaths(ex.o.Location)); err != nil {
		return nil, err
	}
	bld.TrimMetadataLogs(0)
	meta, err := bld.Build()
	if err != nil {
		return nil, fmt.Errorf("lakehouse: building metadata: %w", err)
	}
	return meta, nil
}

// addSnapshots starts from the view's metadata (or anew) and adds a
// snapshot for each version p adds.
func (ex *exporter) addSnapshots(ctx context.Context, cur view, p exportPlan) (*itable.MetadataBuilder, error) {
	var bld *itable.MetadataBuilder
	var err error
	if cur.meta != nil {
		if bld, err = itable.MetadataBuilderFromBase(cur.meta, ex.o.Location+"/"+layout.MetadataKey(cur.n)); err != nil {
			return nil, err
		}
		if err := ex.startFrom(ctx, cur.meta, p.newest); err != nil {
			return nil, err
		}
	}
	ms := &prefetched{last: ex.base}
	for i, v := range p.add {
		m, err := ms.get(ctx, ex.b, p.add, i)
		if err != nil {
			return nil, fmt.Errorf("lakehouse: reading version %d: %w", v, err)
		}
		if bld == nil {
			if bld, err = newBuilder(m, ex.o.Location); err != nil {
				return nil, err
			}
		}
		sc, err := ex.schemaFor(bld, m)
		if err == nil {
			err = sortOrderFor(bld, m, sc)
		}
		if err != nil {
			return nil, fmt.Errorf("lakehouse: version %d: %w", v, err)
		}
		snap, err := ex.snapshot(ctx, m, sc)
		if err != nil {
			return nil, fmt.Errorf("lakehouse: version %d: %w", v, err)
		}
		if err := bld.AddSnapshot(snap); err != nil {
			return nil, fmt.Errorf("lakehouse: version %d: %w", v, err)
		}
		if ex.o.OnProgress != nil {
			ex.o.OnProgress(int64(i+1), int64(len(p.add)))
		}
	}
	if bld == nil {
		return nil, fmt.Errorf("lakehouse: nothing to describe: %w", format.ErrNotFound)
	}
	return bld, nil
}

// setRefs points the main branch at p's newest version and the view's
// tags at theirs, removing the tags the view no longer holds.
func setRefs(bld *itable.MetadataBuilder, cur view, p exportPlan) error {
	if err := bld.SetSnapshotRef(itable.MainBranch, int64(p.main()), itable.BranchRef); err != nil {
		return err
	}
	if cur.meta != nil {
		for name := range cur.meta.Refs() {
			if name != itable.MainBranch {
				if _, ok := p.refs[name]; !ok {
					if err := bld.RemoveSnapshotRef(name); err != nil {
						return err
					}
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.refs)) {
		if err := bld.SetSnapshotRef(name, int64(p.refs[name]), itable.TagRef); err != nil {
			return err
		}
	}
	return nil
}

// enginesPaths are the view's properties that send what engines appending
// through a catalog write under _iceberg/engines/: Strata copies the rows
// of the data files into fragments of its own, and garbage collection
// deletes what the engines wrote there once older than its safety age.
func enginesPaths(loc string) iceberg.Properties {
	return iceberg.Properties{
		itable.WriteMetadataPathKey: loc + "/" + EnginesDir + "metadata",
		itable.WriteDataPathKey:     loc + "/" + EnginesDir + "data",
	}
}

// namesEnginesPaths says whether the view's metadata has enginesPaths (a
// view an older build wrote has not: the next export writes them).
func namesEnginesPaths(meta itable.Metadata, loc string) bool {
	for k, v := range enginesPaths(loc) {
		if meta.Properties()[k] != v {
			return false
		}
	}
	return true
}

// viewOfThisTable says whether the view describes this table, not one
// dropped at its place before it was made again (a drop that raced an
// export can leave the old view behind): the view's newest snapshot must
// name a version the table has, made by the commit the snapshot records.
func viewOfThisTable(ctx context.Context, b blob.Bucket, st exportState) (bool, error) {
	have := st.cur.versions()
	if len(have) == 0 || len(st.listed) == 0 {
		return true, nil
	}
	newest := have[len(have)-1]
	if newest > st.listed[0].Version {
		return false, nil
	}
	snap := st.cur.meta.SnapshotByID(int64(newest))
	if snap == nil || snap.Summary == nil || snap.Summary.Properties[PropCommitID] == "" {
		return true, nil // an older build's summary: nothing to tell by
	}
	txn, err := table.ReadTransaction(ctx, b, newest)
	if errors.Is(err, format.ErrVersionNotFound) {
		return false, nil // garbage collection keeps what the view describes
	}
	if err != nil {
		return false, err
	}
	return txn.CommitID == snap.Summary.Properties[PropCommitID], nil
}
