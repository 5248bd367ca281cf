package lakehouse_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	iceio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // registers s3:// for the read-back
	itable "github.com/apache/iceberg-go/table"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/lakehouse"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
	"github.com/stratadb/strata/walshard"
)

var ctx = context.Background()

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// store is a bucket URL and how iceberg-go reaches the same objects.
type store struct {
	url   string
	props map[string]string
}

func stores(t *testing.T) map[string]func(t *testing.T) store {
	return map[string]func(t *testing.T) store{
		"file": func(t *testing.T) store { return store{url: filepath.Join(t.TempDir(), "t")} },
		"minio": func(t *testing.T) store {
			srv := testenv.MinIO(t)
			return store{url: srv.URL(t), props: map[string]string{
				iceio.S3EndpointURL:     srv.Endpoint,
				iceio.S3Region:          "us-east-1",
				iceio.S3AccessKeyID:     testenv.MinIOUser,
				iceio.S3SecretAccessKey: testenv.MinIOPassword,
			}}
		},
	}
}

// rowsOf renders every row of a result as one line, sorted: the same rows
// with the same values give the same lines whatever the Arrow types'
// widths (string or large string).
func rowsOf(t *testing.T, recs []arrow.RecordBatch) []string {
	t.Helper()
	var out []string
	for _, rec := range recs {
		sc := rec.Schema()
		for i := range int(rec.NumRows()) {
			var sb strings.Builder
			for c := range int(rec.NumCols()) {
				fmt.Fprintf(&sb, "%s=%s|", sc.Field(c).Name, rec.Column(c).ValueStr(i))
			}
			out = append(out, sb.String())
		}
	}
	slices.Sort(out)
	return out
}

// strataRows reads version v with Strata's own scan.
func strataRows(t *testing.T, b blob.Bucket, v uint64) []string {
	t.Helper()
	s, err := table.Open(ctx, b, &table.OpenOptions{Version: v})
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	for rec, err := range s.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	return rowsOf(t, recs)
}

// icebergRows reads a snapshot of the view with iceberg-go's own scan.
func icebergRows(t *testing.T, st store, location string, snapshot int64) []string {
	t.Helper()
	tbl, err := itable.NewFromLocation(ctx, itable.Identifier{"strata", "t"}, location, iceio.LoadFSFunc(st.props, location), nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := []itable.ScanOption{}
	if snapshot != 0 {
		opts = append(opts, itable.WithSnapshotID(snapshot))
	}
	_, it, err := tbl.Scan(opts...).ToArrowRecords(ctx)
	if err != nil {
		t.Fatalf("iceberg scan of snapshot %d: %v", snapshot, err)
	}
	var recs []arrow.RecordBatch
	for rec, err := range it {
		if err != nil {
			t.Fatalf("iceberg scan of snapshot %d: %v", snapshot, err)
		}
		recs = append(recs, rec)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	return rowsOf(t, recs)
}

// history builds a table through every kind of commit and returns the
// versions worth reading: after the first delete, after the compaction,
// the tagged one, and the latest.
func history(t *testing.T, b blob.Bucket) (older []uint64, tagged uint64) {
	t.Helper()
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendRows := func(w, seq, n int) {
		rec := rollouts.Batch(testenv.Allocator(t), 42, w, int64(seq), n)
		defer rec.Release()
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		appendRows(0, i*20, 20)
	}
	// viaShard appends batches of 15 rows of worker w through shard id,
	// flushing after each, then merges.
	viaShard := func(id string, reuse int64, w, batches int) {
		sh, err := walshard.Open(ctx, b, &walshard.Options{Shard: id, ReuseBytes: reuse, FlushInterval: time.Hour, MergeInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer sh.Close()
		for i := range batches {
			rec := rollouts.Batch(testenv.Allocator(t), 42, w, int64(i*15), 15)
			err := sh.Append(ctx, rec)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sh.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := sh.Merge(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Two shard generations merged into the table; and a shard whose WAL
	// entries join the table as they are: the view names them as data
	// files.
	viaShard("w1", 0, 1, 2)
	viaShard("w3", 1, 3, 1)
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(m.Fragments, func(f format.Fragment) bool { return f.Key == format.WALKey("w3", 2) }) {
		t.Fatalf("shard w3's WAL entry is not a fragment: %+v", m.Fragments)
	}
	refresh := func() uint64 {
		v, err := table.LatestVersion(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if _, n, err := tb.Delete(ctx, expr.Lt("step", value.Int(5))); err != nil || n == 0 {
		t.Fatalf("first delete: %d rows, %v", n, err)
	}
	older = append(older, refresh())
	if _, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil); err != nil {
		t.Fatal(err)
	}
	older = append(older, refresh())
	appendRows(0, 60, 20)
	if _, n, err := tb.Delete(ctx, expr.Gt("step", value.Int(70))); err != nil || n == 0 {
		t.Fatalf("second delete: %d rows, %v", n, err)
	}
	tagged = refresh()
	if err := table.CreateTag(ctx, b, "before-last", tagged); err != nil {
		t.Fatal(err)
	}
	appendRows(2, 0, 10)
	return older, tagged
}

// A table built by appends, shard merges, a delete, a compaction, a second
// delete and a tag reads through iceberg-go exactly as Strata reads it —
// the current snapshot, the tagged one and two older ones — on a folder and
// on MinIO; an export after one more commit adds one snapshot; and after
// garbage collection every snapshot the view names still reads.
func TestIcebergReadersSeeWhatStrataSees(t *testing.T) {
	for name, mk := range stores(t) {
		t.Run(name, func(t *testing.T) {
			st := mk(t)
			b, err := blob.Open(ctx, st.url)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			older, tagged := history(t, b)
			loc, err := layout.LocationOf(st.url)
			if err != nil {
				t.Fatal(err)
			}
			res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			latest, _ := table.LatestVersion(ctx, b)
			if !res.Written || res.Current != latest || len(res.Snapshots) < 10 {
				t.Fatalf("export: %+v (latest %d)", res, latest)
			}
			check := func(location string, versions ...uint64) {
				t.Helper()
				for _, v := range versions {
					want, got := strataRows(t, b, v), icebergRows(t, st, location, int64(v))
					if !slices.Equal(want, got) {
						t.Fatalf("version %d: Strata reads %d rows, iceberg-go %d; first difference: Strata %.200q, iceberg-go %.200q", v, len(want), len(got), firstDiff(want, got), firstDiff(got, want))
					}
				}
			}
			check(res.MetadataLocation, append(older, tagged, latest)...)
			// The current snapshot by default, and the tag as a ref.
			if got := icebergRows(t, st, res.MetadataLocation, 0); !slices.Equal(got, strataRows(t, b, latest)) {
				t.Fatal("the current snapshot is not the latest version")
			}
			meta := readMeta(t, st, res.MetadataLocation)
			if r, ok := maps.Collect(meta.Refs())["before-last"]; !ok || uint64(r.SnapshotID) != tagged || r.SnapshotRefType != itable.TagRef {
				t.Fatalf("tag ref: %+v, %v", r, ok)
			}

			// Nothing new: nothing written.
			again, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc}, time.Now())
			if err != nil || again.Written || again.MetadataKey != res.MetadataKey {
				t.Fatalf("an export with nothing new: %+v, %v", again, err)
			}

			// One more commit: one more snapshot, few requests.
			tb, err := commit.OpenTable(ctx, b, nil)
			if err != nil {
				t.Fatal(err)
			}
			rec := rollouts.Batch(testenv.Allocator(t), 42, 3, 0, 5)
			if _, err := tb.Append(ctx, rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
			before, _ := blob.StatsOf(b)
			next, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			after, _ := blob.StatsOf(b)
			spent := after.Sub(before)
			if len(next.Added) != 1 || next.Current != latest+1 {
				t.Fatalf("export after one commit: %+v", next)
			}
			if spent.Requests() > 16 {
				t.Fatalf("an export after one commit made %d requests (%+v)", spent.Requests(), spent)
			}
			check(next.MetadataLocation, latest+1, tagged, older[1])

			// Garbage collection two hours on keeps what the view names;
			// an export then drops the versions that aged out, and the
			// next collection takes them.
			later := time.Now().Add(2 * time.Hour)
			gcPolicy := &compactor.GCPolicy{KeepVersions: 2, RetainFor: time.Hour, SafetyAge: time.Hour}
			if _, err := compactor.GC(ctx, b, gcPolicy, later); err != nil {
				t.Fatal(err)
			}
			check(next.MetadataLocation, next.Snapshots...)
			pruned, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc, KeepVersions: 2, RetainFor: time.Hour}, later)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(pruned.Snapshots, tagged) || !slices.Equal(pruned.Snapshots, []uint64{tagged, latest, latest + 1}) || len(pruned.Dropped) == 0 {
				t.Fatalf("export after retention: %+v", pruned)
			}
			res2, err := compactor.GC(ctx, b, gcPolicy, later)
			if err != nil {
				t.Fatal(err)
			}
			if len(res2.VersionsDeleted) == 0 {
				t.Fatalf("the collection after the export took nothing: %+v", res2)
			}
			// The view's own objects that no longer serve went too: older
			// metadata, and the manifest lists of dropped snapshots.
			var viewDeleted int
			for _, k := range res2.ObjectsDeleted {
				if strings.HasPrefix(k, format.IcebergDir) {
					viewDeleted++
				}
			}
			if viewDeleted == 0 || exists(t, b, layout.MetadataKey(1)) || !exists(t, b, pruned.MetadataKey) || !exists(t, b, layout.HintKey) {
				t.Fatalf("collection of the view's objects: deleted %d (%v)", viewDeleted, res2.ObjectsDeleted)
			}
			check(pruned.MetadataLocation, pruned.Snapshots...)
		})
	}
}

func exists(t *testing.T, b blob.Bucket, key string) bool {
	t.Helper()
	_, err := b.Attributes(ctx, key)
	if err != nil && !errors.Is(err, blob.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// firstDiff returns the first row of a that b lacks.
func firstDiff(a, b []string) string {
	for _, r := range a {
		if _, found := slices.BinarySearch(b, r); !found {
			return r
		}
	}
	return ""
}

func readMeta(t *testing.T, st store, location string) itable.Metadata {
	t.Helper()
	tbl, err := itable.NewFromLocation(ctx, itable.Identifier{"strata", "t"}, location, iceio.LoadFSFunc(st.props, location), nil)
	if err != nil {
		t.Fatal(err)
	}
	return tbl.Metadata()
}
