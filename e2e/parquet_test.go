package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
)

// Strata's files are standard Parquet: every fragment of a table, read from
// disk with arrow-go's plain Parquet reader (not Strata's scan code), gives
// the same rows as a scan.
func TestFragmentsAreStandardParquet(t *testing.T) {
	dir := t.TempDir()
	u := "file://" + dir
	for w := range 2 {
		p := run(t, "strata", "worker", u, "--worker", fmt.Sprint(w), "--appends", "5", "--rows", "30", "--flush-interval", "1ms", "--merge-interval", "1ms")
		p.wait(t, time.Minute)
	}
	b, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	scanned := map[int64]float64{}
	for rec, err := range s.Scan(ctx, table.ScanOptions{Columns: []string{"id", "reward"}}) {
		if err != nil {
			t.Fatal(err)
		}
		ids, rewards := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Float64)
		for i := range ids.Len() {
			scanned[ids.Value(i)] = rewards.Value(i)
		}
	}
	read := 0
	for _, f := range s.Manifest().Fragments {
		pf, err := file.OpenParquetFile(filepath.Join(dir, filepath.FromSlash(f.Key)), false)
		if err != nil {
			t.Fatalf("%s is not a Parquet file: %v", f.Key, err)
		}
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1024}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(ctx)
		if err != nil {
			t.Fatalf("reading %s: %v", f.Key, err)
		}
		idCol := tbl.Column(int(tbl.Schema().FieldIndices("id")[0])).Data()
		rwCol := tbl.Column(int(tbl.Schema().FieldIndices("reward")[0])).Data()
		for c := range idCol.Chunks() {
			ids, rewards := idCol.Chunk(c).(*array.Int64), rwCol.Chunk(c).(*array.Float64)
			for i := range ids.Len() {
				if got, ok := scanned[ids.Value(i)]; !ok || got != rewards.Value(i) {
					t.Fatalf("%s: row id %d differs from the scan", f.Key, ids.Value(i))
				}
				read++
			}
		}
		tbl.Release()
		pf.Close()
	}
	if read != len(scanned) || read != 300 {
		t.Fatalf("plain reader read %d rows, scan %d, want 300", read, len(scanned))
	}
}
