package ingest_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/table/evolve"
)

// An input of no rows is refused when its columns would be refused with
// rows: a schema-only IPC stream, a header-only CSV, a Parquet file of no
// rows. One whose columns fit is an empty input.
func TestAnInputOfNoRowsIsCheckedAsOneWithRows(t *testing.T) {
	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Float64}}, nil)
	badType := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil)
	noID := arrow.NewSchema([]arrow.Field{{Name: "msg", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	for name, s := range map[string]*arrow.Schema{"other columns": other, "another type": badType, "a non-nullable column missing": noID} {
		one := emptyOf(t, s, 1)
		data := stream(t, s, nil, one)
		one.Release()
		_, withRows, err := ingest.ReadIPC(bytes.NewReader(data), schema, ingest.Options{})
		if !errors.Is(err, evolve.ErrBadInput) {
			t.Fatalf("%s, with a row: %v (%d batches)", name, err, len(withRows))
		}
		_, recs, err2 := ingest.ReadIPC(bytes.NewReader(stream(t, s, nil)), schema, ingest.Options{})
		if !errors.Is(err2, evolve.ErrBadInput) || err2.Error() != err.Error() {
			t.Errorf("%s, schema only: %v (%d batches), want %v", name, err2, len(recs), err)
		}
		pq := filepath.Join(t.TempDir(), "empty.parquet")
		writeParquet(t, pq, emptyOf(t, s, 0))
		var pqErr error
		for _, err := range ingest.ParquetFile(pq, schema, ingest.Options{}) {
			pqErr = err
		}
		if !errors.Is(pqErr, evolve.ErrBadInput) {
			t.Errorf("%s, Parquet of no rows: %v", name, pqErr)
		}
	}
	if _, err := ingest.ReadCSV(bytes.NewReader([]byte("msg\n")), schema, ingest.Options{}); !errors.Is(err, evolve.ErrBadInput) {
		t.Errorf("a header-only CSV without the non-nullable id: %v", err)
	}
	// Columns that fit, and unknown ones when asked to ignore them.
	fits := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}, {Name: "x", Type: arrow.PrimitiveTypes.Float64}}, nil)
	if _, recs, err := ingest.ReadIPC(bytes.NewReader(stream(t, fits, nil)), schema, ingest.Options{IgnoreUnknown: true}); err != nil || len(recs) != 0 {
		t.Fatalf("a schema-only stream that fits: %v, %d batches", err, len(recs))
	}
	if recs, err := ingest.ReadCSV(bytes.NewReader([]byte("id,msg\n")), schema, ingest.Options{}); err != nil || len(recs) != 0 {
		t.Fatalf("a header-only CSV that fits: %v, %d batches", err, len(recs))
	}
}

// emptyOf makes a batch of s with n rows of zero values.
func emptyOf(t *testing.T, s *arrow.Schema, n int) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(testenv.Arrow, s)
	defer b.Release()
	for range n {
		for _, fb := range b.Fields() {
			fb.AppendEmptyValue()
		}
	}
	return b.NewRecordBatch()
}

func writeParquet(t *testing.T, path string, rec arrow.RecordBatch) {
	t.Helper()
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WriteParquet(t, f, rec, parquet.NewWriterProperties(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
}
