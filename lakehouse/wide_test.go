package lakehouse_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	itable "github.com/apache/iceberg-go/table"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/lakehouse"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table/format"
)

// wideSchema has cols columns: an int64 key, then int64, string and
// float64 columns in turn, the strings nullable.
func wideSchema(cols int) *arrow.Schema {
	fields := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}
	for i := 1; i < cols; i++ {
		f := arrow.Field{Name: fmt.Sprintf("c%05d", i), Type: arrow.PrimitiveTypes.Int64}
		switch i % 3 {
		case 1:
			f.Type, f.Nullable = arrow.BinaryTypes.String, true
		case 2:
			f.Type = arrow.PrimitiveTypes.Float64
		}
		fields = append(fields, f)
	}
	return arrow.NewSchema(fields, nil)
}

// wideBatch builds rows rows of schema: column i of row r holds
// r*columns+i (as text for the strings, null in odd rows; half of it for
// the floats).
func wideBatch(tb testing.TB, schema *arrow.Schema, rows int) arrow.RecordBatch {
	bld := array.NewRecordBuilder(testenv.Allocator(tb), schema)
	defer bld.Release()
	for r := range rows {
		for i, f := range bld.Fields() {
			v := int64(r*schema.NumFields() + i)
			switch f := f.(type) {
			case *array.Int64Builder:
				f.Append(v)
			case *array.StringBuilder:
				if r%2 == 1 {
					f.AppendNull()
				} else {
					f.Append(strconv.FormatInt(v, 10))
				}
			case *array.Float64Builder:
				f.Append(float64(v) / 2)
			}
		}
	}
	return bld.NewRecordBatch()
}

// wideTable creates a table of schema with rows rows of wideBatch in one
// fragment.
func wideTable(tb testing.TB, b blob.Bucket, schema *arrow.Schema, rows int) {
	tb.Helper()
	rec := wideBatch(tb, schema, rows)
	defer rec.Release()
	if _, err := commit.Create(ctx, b, schema, nil, nil, rec); err != nil {
		tb.Fatal(err)
	}
}

// The view of a table of 2,500 columns describes each column, in order,
// with the id the name mapping gives it, and its data file carries every
// column's counts and bounds under that id; iceberg-go reads back exactly
// the rows Strata reads. After the table is overwritten with its columns
// in reverse order and one more, every column keeps its id, the new one
// takes the next, and both snapshots still read as Strata reads them.
func TestAWideTableExportsEveryColumn(t *testing.T) {
	const cols, rows = 2500, 10
	dir := filepath.Join(t.TempDir(), "t")
	b := open(t, dir)
	wideTable(t, b, wideSchema(cols), rows)
	res := latestReadsTheSame(t, dir, b)
	meta := readMeta(t, store{}, res.MetadataLocation)
	ids := checkWideSchema(t, meta, cols)
	checkWideFile(t, onlyDataFile(t, res.MetadataLocation), meta.CurrentSchema().Fields(), cols, rows)

	v1 := wideSchema(cols).Fields()
	slices.Reverse(v1)
	v2 := arrow.NewSchema(append(v1, arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), nil)
	rec := wideBatch(t, v2, rows)
	defer rec.Release()
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Overwrite(ctx, v2, rec); err != nil {
		t.Fatal(err)
	}
	res = latestReadsTheSame(t, dir, b)
	if len(res.Snapshots) != 2 {
		t.Fatalf("snapshots %v", res.Snapshots)
	}
	meta = readMeta(t, store{}, res.MetadataLocation)
	fields := meta.CurrentSchema().Fields()
	for i, f := range fields {
		want, ok := ids[f.Name]
		if f.Name == "extra" {
			want, ok = cols+1, i == cols
		}
		if !ok || f.ID != want || f.Name != v2.Field(i).Name {
			t.Fatalf("after the overwrite, column %d is %q with id %d, want %q with id %d", i, f.Name, f.ID, v2.Field(i).Name, want)
		}
	}
	if meta.LastColumnID() != cols+1 {
		t.Fatalf("last column id %d, want %d", meta.LastColumnID(), cols+1)
	}
}

// checkWideSchema checks the view's current schema and name mapping
// against wideSchema(cols) and returns the columns' ids.
func checkWideSchema(t *testing.T, meta itable.Metadata, cols int) map[string]int {
	t.Helper()
	fields := meta.CurrentSchema().Fields()
	if len(fields) != cols {
		t.Fatalf("the view's schema has %d columns, the table %d", len(fields), cols)
	}
	ids, seen, schema := map[string]int{}, map[int]bool{}, wideSchema(cols)
	for i, f := range fields {
		want := schema.Field(i)
		if f.Name != want.Name || f.Required == want.Nullable || seen[f.ID] {
			t.Fatalf("column %d is %q (id %d, required %v), want %q (nullable %v), ids unique", i, f.Name, f.ID, f.Required, want.Name, want.Nullable)
		}
		ids[f.Name], seen[f.ID] = f.ID, true
	}
	var mapping iceberg.NameMapping
	if err := json.Unmarshal([]byte(meta.Properties()[itable.DefaultNameMappingKey]), &mapping); err != nil || len(mapping) != cols {
		t.Fatalf("the name mapping maps %d columns (%v), want %d", len(mapping), err, cols)
	}
	for _, m := range mapping {
		if len(m.Names) != 1 || m.FieldID == nil || ids[m.Names[0]] != *m.FieldID {
			t.Fatalf("name mapping %+v disagrees with the schema", m)
		}
	}
	return ids
}

// checkWideFile checks a wideTable fragment's data file: every column's
// value and null counts, and the int64 columns' bounds.
func checkWideFile(t *testing.T, df iceberg.DataFile, fields []iceberg.NestedField, cols, rows int) {
	t.Helper()
	values, nulls, lower, upper := df.ValueCounts(), df.NullValueCounts(), df.LowerBoundValues(), df.UpperBoundValues()
	for i, f := range fields {
		if values[f.ID] != int64(rows) {
			t.Fatalf("column %s: %d values, want %d", f.Name, values[f.ID], rows)
		}
		wantNulls := int64(0)
		if i%3 == 1 {
			wantNulls = int64(rows / 2)
		}
		if nulls[f.ID] != wantNulls {
			t.Fatalf("column %s: %d nulls, want %d", f.Name, nulls[f.ID], wantNulls)
		}
		if i%3 != 0 { // int64 columns: their bounds are exact
			continue
		}
		lo, hi := int64(i), int64((rows-1)*cols+i)
		if got, err := iceberg.LiteralFromBytes(iceberg.PrimitiveTypes.Int64, lower[f.ID]); err != nil || got != iceberg.Int64Literal(lo) {
			t.Fatalf("column %s: lower bound %v (%v), want %d", f.Name, got, err, lo)
		}
		if got, err := iceberg.LiteralFromBytes(iceberg.PrimitiveTypes.Int64, upper[f.ID]); err != nil || got != iceberg.Int64Literal(hi) {
			t.Fatalf("column %s: upper bound %v (%v), want %d", f.Name, got, err, hi)
		}
	}
}

// onlyDataFile reads, with iceberg-go, the one data file the current
// snapshot of the view at location names.
func onlyDataFile(t *testing.T, location string) iceberg.DataFile {
	t.Helper()
	tbl, err := itable.NewFromLocation(ctx, itable.Identifier{"strata", "t"}, location, iceio.LoadFSFunc(nil, location), nil)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	var files []iceberg.DataFile
	for _, mf := range mfs {
		for e, err := range mf.Entries(fs, true) {
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, e.DataFile())
		}
	}
	if len(files) != 1 || files[0].ContentType() != iceberg.EntryContentData {
		t.Fatalf("the current snapshot names %d files, want one data file", len(files))
	}
	return files[0]
}

// BenchmarkExportWide exports the view of a 10-row table of 1,000, 2,500
// and 5,000 columns from scratch (as the compactor Job's --iceberg pass
// does for a new view; later passes do the same work per new version),
// with the view's own field ids and with ids the columns carry:
//
//	go test -run '^$' -bench ExportWide -benchtime 3x ./lakehouse
func BenchmarkExportWide(b *testing.B) {
	for _, cols := range []int{1000, 2500, 5000} {
		for _, ids := range []bool{false, true} {
			name, schema := fmt.Sprintf("columns=%d", cols), wideSchema(cols)
			if ids {
				name, schema = name+",field-ids", arrow.NewSchema(withFieldIDs(schema), nil)
			}
			b.Run(name, func(b *testing.B) { benchmarkExport(b, schema) })
		}
	}
}

func benchmarkExport(b *testing.B, schema *arrow.Schema) {
	dir := filepath.Join(b.TempDir(), "t")
	bk, err := blob.Open(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	wideTable(b, bk, schema, 10)
	loc, _ := layout.LocationOf(dir)
	for b.Loop() {
		b.StopTimer()
		for o, err := range blob.List(ctx, bk, format.IcebergDir, 0) {
			if err == nil {
				err = bk.Delete(ctx, o.Key)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if res, err := lakehouse.Export(ctx, bk, &lakehouse.Options{Location: loc}, time.Now()); err != nil || !res.Written {
			b.Fatalf("export: %+v, %v", res, err)
		}
	}
}
