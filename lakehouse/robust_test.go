package lakehouse_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/lakehouse"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

func open(t *testing.T, url string) blob.Bucket {
	t.Helper()
	b, err := blob.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// latestReadsTheSame fails unless the view's newest metadata reads, for
// every snapshot it describes, what Strata reads of that version.
func latestReadsTheSame(t *testing.T, dir string, b blob.Bucket) lakehouse.Result {
	t.Helper()
	loc, _ := layout.LocationOf(dir)
	res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	latest, _ := table.LatestVersion(ctx, b)
	if res.Current != latest {
		t.Fatalf("the view's current version is %d, the table's %d", res.Current, latest)
	}
	hint, err := b.Get(ctx, layout.HintKey)
	if err != nil || layout.MetadataKey(atoi(t, string(hint))) != res.MetadataKey {
		t.Fatalf("the hint says %q (%v), the newest metadata is %s", hint, err, res.MetadataKey)
	}
	for _, v := range res.Snapshots {
		if want, got := strataRows(t, b, v), icebergRows(t, store{}, res.MetadataLocation, int64(v)); !slices.Equal(want, got) {
			t.Fatalf("version %d: Strata reads %d rows, iceberg-go %d", v, len(want), len(got))
		}
	}
	return res
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("hint %q is not a number", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// An export that dies at any request — before, between or after its
// objects, its metadata and its hint — leaves a view that the next export
// finishes: every snapshot then reads as Strata reads its version.
func TestAnExportCutShortAnywhereIsFinishedByTheNext(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	history(t, open(t, src))
	loc, _ := layout.LocationOf(src)
	// How many requests a whole export makes.
	whole := fault.Wrap(open(t, src+"-count"), fault.Never())
	if err := os.CopyFS(src+"-count", os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if _, err := lakehouse.Export(ctx, whole, &lakehouse.Options{Location: loc + "-count"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	n := whole.Requests()
	for i := int64(1); i <= n; i++ {
		dir := filepath.Join(t.TempDir(), "t")
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		dloc, _ := layout.LocationOf(dir)
		crashing := fault.Wrap(open(t, dir), fault.CrashAfter(i))
		if _, err := lakehouse.Export(ctx, crashing, &lakehouse.Options{Location: dloc}, time.Now()); err == nil && crashing.Crashed() {
			t.Fatalf("crash after %d requests: the export reported success", i)
		}
		latestReadsTheSame(t, dir, open(t, dir))
	}
}

// Two exports at once both succeed, and the view they leave is whole.
func TestConcurrentExportsLeaveOneWholeView(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	b := open(t, dir)
	history(t, b)
	loc, _ := layout.LocationOf(dir)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = lakehouse.Export(ctx, open(t, dir), &lakehouse.Options{Location: loc}, time.Now())
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	res := latestReadsTheSame(t, dir, b)
	if res.Written {
		t.Fatalf("the exports left work undone: %+v", res)
	}
}

// Types an Iceberg reader would read differently are refused, naming the
// column, and nothing is written.
func TestTypesIcebergCannotHoldAreRefused(t *testing.T) {
	for _, dt := range []arrow.DataType{
		arrow.PrimitiveTypes.Uint64,
		arrow.PrimitiveTypes.Uint32,
		arrow.FixedWidthTypes.Float16,
		&arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"},
		&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Europe/Paris"},
		arrow.FixedWidthTypes.Time32ms,
		arrow.ListOf(arrow.PrimitiveTypes.Uint64),
	} {
		t.Run(dt.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t")
			b := open(t, dir)
			sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "odd", Type: dt, Nullable: true}}, nil)
			if _, err := commit.Create(ctx, b, sc, nil, nil); err != nil {
				t.Fatal(err)
			}
			loc, _ := layout.LocationOf(dir)
			_, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc}, time.Now())
			if !errors.Is(err, layout.ErrUnsupported) || !strings.Contains(err.Error(), `"odd`) {
				t.Fatalf("export of a %s column: %v", dt, err)
			}
			for o, err := range blob.List(ctx, b, format.IcebergDir, 0) {
				t.Fatalf("a refused export wrote %s (%v)", o.Key, err)
			}
		})
	}
}

// An overwrite that adds a column gets a new schema with the old columns'
// ids: the snapshots before and after it read as Strata reads them. One
// that changes a column's type is refused.
func TestSchemaChangesKeepOlderSnapshotsReadable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	b := open(t, dir)
	v1 := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	rec := func(sc *arrow.Schema, n int) arrow.RecordBatch {
		bld := array.NewRecordBuilder(testenv.Allocator(t), sc)
		defer bld.Release()
		for i := range n {
			bld.Field(0).(*array.Int64Builder).Append(int64(i))
			bld.Field(1).(*array.StringBuilder).Append(strings.Repeat("x", i))
			if sc.NumFields() > 2 {
				bld.Field(2).(*array.Float64Builder).Append(float64(i) / 2)
			}
		}
		return bld.NewRecordBatch()
	}
	r1 := rec(v1, 5)
	defer r1.Release()
	if _, err := commit.Create(ctx, b, v1, nil, nil, r1); err != nil {
		t.Fatal(err)
	}
	latestReadsTheSame(t, dir, b)
	v2 := arrow.NewSchema(append(v1.Fields(), arrow.Field{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), nil)
	r2 := rec(v2, 7)
	defer r2.Release()
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Overwrite(ctx, v2, r2); err != nil {
		t.Fatal(err)
	}
	res := latestReadsTheSame(t, dir, b)
	if len(res.Snapshots) != 2 {
		t.Fatalf("snapshots %v", res.Snapshots)
	}

	v3 := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil)
	if _, err := tb.Overwrite(ctx, v3); err != nil {
		t.Fatal(err)
	}
	loc, _ := layout.LocationOf(dir)
	if _, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc}, time.Now()); !errors.Is(err, layout.ErrUnsupported) || !strings.Contains(err.Error(), `"id"`) {
		t.Fatalf("export after a column changed type: %v", err)
	}
}

func TestLocationOf(t *testing.T) {
	abs, _ := filepath.Abs("rel/t")
	for in, want := range map[string]string{
		"s3://lake/tables/t?endpoint=http://127.0.0.1:9000&region=us-east-1": "s3://lake/tables/t",
		"gs://lake/t/":     "gs://lake/t",
		"file:///data/t":   "file:///data/t",
		"/data/t":          "file:///data/t",
		"./rel/t":          "file://" + abs,
		"file://./rel/t":   "file://" + abs,
		"mem://":           "",
		"s3:///no-bucket":  "",
		"ftp://host/table": "",
	} {
		got, err := layout.LocationOf(in)
		if got != want || (want == "") != errors.Is(err, layout.ErrBadLocation) {
			t.Errorf("LocationOf(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// A table whose versions are hours old, made by writers whose clocks
// disagree (a version's time before its parent's), exports: snapshot times
// are the versions' own, raised only where they would go back, and the
// summary keeps each version's own time.
func TestOldVersionsAndSkewedClocksExport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	b := open(t, dir)
	history(t, b)
	latest, err := table.LatestVersion(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	// Age every version by three hours; version 4's writer ran ten
	// minutes behind.
	own := map[uint64]time.Time{}
	for v := uint64(1); v <= latest; v++ {
		m, err := table.ReadManifest(ctx, b, v)
		if err != nil {
			t.Fatal(err)
		}
		m.Timestamp = m.Timestamp.Add(-3 * time.Hour)
		if v == 4 {
			m.Timestamp = m.Timestamp.Add(-10 * time.Minute)
		}
		own[v] = m.Timestamp
		// The transaction records the same time, as a commit writes it
		// (the export rebuilds versions from their transactions); an
		// older build's records none (the export reads those whole).
		m.Transaction.Committed = m.Timestamp
		if v%2 == 0 {
			m.Transaction.Committed = time.Time{}
		}
		data, err := format.EncodeManifest(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(format.ManifestKey(v))), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	loc, _ := layout.LocationOf(dir)
	res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc, KeepVersions: int(latest)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	meta := readMeta(t, store{}, res.MetadataLocation)
	for _, s := range meta.Snapshots() {
		v := uint64(s.SnapshotID)
		want := own[v].UnixMilli()
		if v == 4 {
			want = own[3].UnixMilli()
		}
		if s.TimestampMs != want || s.Summary.Properties[lakehouse.PropTimestamp] != own[v].UTC().Format(time.RFC3339Nano) {
			t.Errorf("version %d: timestamp-ms %d, summary %q; want %d and its own time %v", v, s.TimestampMs, s.Summary.Properties[lakehouse.PropTimestamp], want, own[v])
		}
	}
	latestReadsTheSame(t, dir, b)
}

// collectingDuringExport creates a GC boundary right after the export's
// metadata lands, as a collection that read the view just before would.
type collectingDuringExport struct {
	blob.Bucket
	boundary uint64
	done     bool
}

func (c *collectingDuringExport) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := c.Bucket.PutIfAbsent(ctx, key, data)
	if _, ok := layout.ParseMetadataKey(key); ok && err == nil && !c.done {
		c.done = true
		if err := c.Bucket.PutIfAbsent(ctx, format.GCBoundaryKey(c.boundary), nil); err != nil {
			return err
		}
	}
	return err
}

// A collection whose boundary covers versions an export is adding, and
// which may have read the view before the export's metadata landed, makes
// the export start again and leave those versions out (but tagged ones):
// no snapshot names a version such a collection may be deleting.
func TestAnExportRacingACollectionLeavesOutWhatItMayDelete(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	b := open(t, dir)
	_, tagged := history(t, b)
	latest, _ := table.LatestVersion(ctx, b)
	racing := &collectingDuringExport{Bucket: b, boundary: tagged}
	loc, _ := layout.LocationOf(dir)
	res, err := lakehouse.Export(ctx, racing, &lakehouse.Options{Location: loc, KeepVersions: int(latest)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !racing.done || res.MetadataKey != layout.MetadataKey(2) {
		t.Fatalf("the race did not happen as staged: %+v", res)
	}
	want := []uint64{}
	for v := tagged; v <= latest; v++ {
		want = append(want, v)
	}
	if !slices.Equal(res.Snapshots, want) {
		t.Fatalf("after a collection with boundary %d, the view describes %v; want %v", tagged, res.Snapshots, want)
	}
	latestReadsTheSame(t, dir, b)
}

// A table whose schema came with Parquet field ids (created like a file
// another engine wrote) has those ids in every fragment; readers resolve
// columns by a file's ids before any name mapping, so the view's schema
// takes the same ids — and every column reads as Strata reads it.
func TestFieldIDsTheFragmentsCarryAreTheViewsIDs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	b := open(t, dir)
	id := func(n string) arrow.Metadata { return arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{n}) }
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Metadata: id("7")},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: id("3")},
	}, nil)
	bld := array.NewRecordBuilder(testenv.Allocator(t), sc)
	defer bld.Release()
	for i := range 4 {
		bld.Field(0).(*array.Int64Builder).Append(int64(i))
		bld.Field(1).(*array.StringBuilder).Append(strings.Repeat("y", i+1))
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	if _, err := commit.Create(ctx, b, sc, nil, nil, rec); err != nil {
		t.Fatal(err)
	}
	res := latestReadsTheSame(t, dir, b)
	meta := readMeta(t, store{}, res.MetadataLocation)
	for name, want := range map[string]int{"id": 7, "name": 3} {
		if f, ok := meta.CurrentSchema().FindFieldByName(name); !ok || f.ID != want {
			t.Fatalf("column %s has id %d in the view; its fragments say %d", name, f.ID, want)
		}
	}

	// Ids of -1 (what a file without ids yields) are no ids: names map.
	none := filepath.Join(t.TempDir(), "n")
	nb := open(t, none)
	nsc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Metadata: id("-1")},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: id("-1")},
	}, nil)
	nrec := array.NewRecordBatch(nsc, []arrow.Array{rec.Column(0), rec.Column(1)}, rec.NumRows())
	defer nrec.Release()
	if _, err := commit.Create(ctx, nb, nsc, nil, nil, nrec); err != nil {
		t.Fatal(err)
	}
	latestReadsTheSame(t, none, nb)

	// Ids on some columns only cannot be honoured: refused, not guessed.
	partial := filepath.Join(t.TempDir(), "p")
	pb := open(t, partial)
	psc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Metadata: id("7")},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	if _, err := commit.Create(ctx, pb, psc, nil, nil); err != nil {
		t.Fatal(err)
	}
	loc, _ := layout.LocationOf(partial)
	if _, err := lakehouse.Export(ctx, pb, &lakehouse.Options{Location: loc}, time.Now()); !errors.Is(err, layout.ErrUnsupported) {
		t.Fatalf("export of a schema with ids on some columns: %v", err)
	}
}

// currentReadsTheSame exports and checks the current snapshot alone.
func currentReadsTheSame(t *testing.T, dir string, b blob.Bucket) lakehouse.Result {
	t.Helper()
	loc, _ := layout.LocationOf(dir)
	res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if want, got := strataRows(t, b, res.Current), icebergRows(t, store{}, res.MetadataLocation, 0); !slices.Equal(want, got) {
		t.Fatalf("current version %d: Strata reads %d rows, iceberg-go %d", res.Current, len(want), len(got))
	}
	return res
}

func appendOne(t *testing.T, b blob.Bucket) {
	t.Helper()
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 5, 0, 3)
	defer rec.Release()
	if _, err := tb.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
}

// A store that forgets or damages what the view relies on: the next export
// recovers, or refuses with an error that says what and where — never a
// view that reads wrong.
func TestAnExportRecoversFromAForgetfulStore(t *testing.T) {
	for name, damage := range map[string]func(t *testing.T, b blob.Bucket, res lakehouse.Result){
		"a hint that is not a number": func(t *testing.T, b blob.Bucket, _ lakehouse.Result) {
			if err := b.Put(ctx, layout.HintKey, strings.NewReader("not a number")); err != nil {
				t.Fatal(err)
			}
		},
		"a hint naming metadata that is not there": func(t *testing.T, b blob.Bucket, _ lakehouse.Result) {
			if err := b.Put(ctx, layout.HintKey, strings.NewReader("99")); err != nil {
				t.Fatal(err)
			}
		},
		"the hint gone": func(t *testing.T, b blob.Bucket, _ lakehouse.Result) {
			if err := b.Delete(ctx, layout.HintKey); err != nil {
				t.Fatal(err)
			}
		},
		"the manifest of the view's newest version gone": func(t *testing.T, b blob.Bucket, res lakehouse.Result) {
			if err := b.Delete(ctx, format.ManifestKey(res.Current)); err != nil {
				t.Fatal(err)
			}
		},
		"the manifest list of the view's newest snapshot gone": func(t *testing.T, b blob.Bucket, res lakehouse.Result) {
			for o, err := range blob.List(ctx, b, layout.MetadataDir+fmt.Sprintf("snap-%d-", res.Current), 0) {
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Delete(ctx, o.Key); err != nil {
					t.Fatal(err)
				}
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t")
			b := open(t, dir)
			history(t, b)
			res := currentReadsTheSame(t, dir, b)
			appendOne(t, b) // the damaged version is then not the latest
			damage(t, b, res)
			next := currentReadsTheSame(t, dir, b)
			if next.Current != res.Current+1 {
				t.Fatalf("after the damage the view is at %d, want %d", next.Current, res.Current+1)
			}
			if hint, err := b.Get(ctx, layout.HintKey); err != nil || layout.MetadataKey(atoi(t, string(hint))) != next.MetadataKey {
				t.Fatalf("hint %q (%v), newest metadata %s", hint, err, next.MetadataKey)
			}
			if _, err := layout.ReadRefs(ctx, b); err != nil && name != "the manifest list of the view's newest snapshot gone" {
				t.Fatalf("what GC keeps for the view: %v", err)
			}
		})
	}

	// Damaged metadata is refused by name, with the remedy.
	dir := filepath.Join(t.TempDir(), "t")
	b := open(t, dir)
	history(t, b)
	res := currentReadsTheSame(t, dir, b)
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(res.MetadataKey)), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	loc, _ := layout.LocationOf(dir)
	_, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc}, time.Now())
	if err == nil || !strings.Contains(err.Error(), res.MetadataKey) || !strings.Contains(err.Error(), "delete _iceberg/") {
		t.Fatalf("export over damaged metadata: %v", err)
	}

	// So is a damaged manifest list, by the export and by what garbage
	// collection reads of the view.
	dir = filepath.Join(t.TempDir(), "t")
	b = open(t, dir)
	history(t, b)
	res = currentReadsTheSame(t, dir, b)
	appendOne(t, b)
	var list string
	for o, err := range blob.List(ctx, b, layout.MetadataDir+fmt.Sprintf("snap-%d-", res.Current), 0) {
		if err != nil {
			t.Fatal(err)
		}
		list = o.Key
	}
	data, err := b.Get(ctx, list)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(list)), data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	loc, _ = layout.LocationOf(dir)
	_, err = lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc}, time.Now())
	_, rerr := layout.ReadRefs(ctx, b)
	for _, err := range []error{err, rerr} {
		if err == nil || !strings.Contains(err.Error(), list) || !strings.Contains(err.Error(), "delete _iceberg/") {
			t.Fatalf("over a damaged manifest list: %v", err)
		}
	}
}

// A response lost at any one of an export's requests (the request landed,
// its caller heard an error) leaves a view the next export completes.
func TestAnExportLosingAnyResponseIsCompletedByTheNext(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	history(t, open(t, src))
	for i := int64(1); ; i++ {
		dir := filepath.Join(t.TempDir(), "t")
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		loc, _ := layout.LocationOf(dir)
		lossy := fault.Wrap(open(t, dir), fault.Nth(i, fault.Always(fault.Fault{Action: fault.LoseResponse})))
		_, err := lakehouse.Export(ctx, lossy, &lakehouse.Options{Location: loc}, time.Now())
		if len(lossy.Injected()) == 0 {
			if err != nil {
				t.Fatal(err)
			}
			break // the export made fewer than i requests: all positions tried
		}
		latestReadsTheSame(t, dir, open(t, dir))
	}
}

func TestALocationMustBeAnAbsoluteURI(t *testing.T) {
	for _, loc := range []string{"", "relative/path", "/abs/without/scheme", "s3://lake/t/", "s3:/lake/t", "://lake/t",
		"s3://lake/t\n", "s3://lake/t\nfile:///etc", "file:///tmp/a\tb", "s3://lake/\x00t", "gs://lake/t\u0085"} {
		if err := (&lakehouse.Options{Location: loc}).Validate(); !errors.Is(err, layout.ErrInvalidOptions) {
			t.Errorf("Location %q: %v", loc, err)
		}
	}
	for _, loc := range []string{"s3://lake/t", "gs://lake/t", "file:///tmp/my tables/t", "file:///tmp/café"} {
		if err := (&lakehouse.Options{Location: loc}).Validate(); err != nil {
			t.Errorf("Location %q: %v", loc, err)
		}
	}
	if err := (&lakehouse.Options{Location: "s3://lake/t\n"}).Validate(); err == nil || !strings.Contains(err.Error(), "control character U+000A") {
		t.Errorf("a newline: %v", err)
	}
}
