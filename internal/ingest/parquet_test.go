package ingest_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/internal/testenv"
	"github.com/stratadb/strata/table"
)

// A Parquet file whose footer gives a column chunk a negative length is
// refused as bad input naming the file. For the fields of a struct column
// the Parquet reader sized the chunk's buffer in a goroutine of its own:
// strata append died with a panic there, out of reach of its recover.
func TestAParquetFileWithADamagedChunkLengthIsBadInput(t *testing.T) {
	rec := batch(t, 200)
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(schema, &buf, parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "in.parquet")
	for _, c := range []int{0, 2, 3} { // id, meta.a, meta.b
		if err := os.WriteFile(path, testenv.NegativeChunkLength(t, buf.Bytes(), c), 0o644); err != nil {
			t.Fatal(err)
		}
		var got error
		for r, err := range ingest.ParquetFile(path, schema, ingest.Options{}) {
			if err != nil {
				got = err
				break
			}
			r.Release()
		}
		var ie *table.InputError
		if !errors.As(got, &ie) {
			t.Fatalf("column %d: %v, want bad input", c, got)
		}
	}
}
