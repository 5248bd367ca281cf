package ingest_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/table/evolve"
)

// parquetOf returns a Parquet file (zstd) of rows rows of schema.
func parquetOf(t testing.TB, rows int) []byte {
	t.Helper()
	rec := batch(t, rows)
	defer rec.Release()
	var buf bytes.Buffer
	testenv.WriteParquet(t, &buf, rec, parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd)), pqarrow.DefaultWriterProps())
	return buf.Bytes()
}

// readParquet reads the file at path through strata append's reader and
// returns its first error.
func readParquet(path string) error {
	for r, err := range ingest.ParquetFile(path, schema, ingest.Options{}) {
		if err != nil {
			return err
		}
		r.Release()
	}
	return nil
}

// A Parquet file whose footer gives a column chunk a negative length is
// refused as bad input naming the file. For the fields of a struct column
// the Parquet reader sized the chunk's buffer in a goroutine of its own:
// strata append died with a panic there, out of reach of its recover.
func TestAParquetFileWithADamagedChunkLengthIsBadInput(t *testing.T) {
	data := parquetOf(t, 200)
	path := filepath.Join(t.TempDir(), "in.parquet")
	for _, c := range []int{0, 2, 3} { // id, meta.a, meta.b
		if err := os.WriteFile(path, testenv.NegativeChunkLength(t, data, c), 0o644); err != nil {
			t.Fatal(err)
		}
		got := readParquet(path)
		var ie *evolve.InputError
		if !errors.As(got, &ie) {
			t.Fatalf("column %d: %v, want bad input", c, got)
		}
	}
}

// A Parquet file whose footer gives a struct's field a physical type
// Parquet does not have is refused as bad input: the reader built a nil
// reader for it, in the field's goroutine, and strata append died on its
// first use (found by fuzzing).
func TestAParquetFileWithAnUnknownColumnTypeIsBadInput(t *testing.T) {
	// The schema element of meta.a: type INT32 (field 1, zigzag 2),
	// repetition OPTIONAL (field 3), name "a" (field 4), converted type
	// INT_32 (field 5), then its logical type (field 10, a union whose
	// member INTEGER is field 10 again).
	elem := []byte{0x15, 0x02, 0x25, 0x02, 0x18, 0x01, 'a', 0x25, 0x22, 0x4c, 0xac}
	data := parquetOf(t, 20)
	at := bytes.Index(data, elem)
	if at < 0 || bytes.Contains(data[at+1:], elem) {
		t.Fatal("the schema element of meta.a is not in the footer once")
	}
	data[at+1] = 0x01  // type -1
	data[at+10] = 0xbc // a union member no one knows: no logical type to check the type against
	path := filepath.Join(t.TempDir(), "in.parquet")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var ie *evolve.InputError
	if got := readParquet(path); !errors.As(got, &ie) {
		t.Fatalf("%v, want bad input", got)
	}
}

// FuzzParquetFile: any file gives a clean error or batches of the table's
// schema — never a panic, in strata append's goroutine or the reader's.
func FuzzParquetFile(f *testing.F) {
	f.Add(parquetOf(f, 20))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "in.parquet")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := readParquet(path); err != nil {
			var ie *evolve.InputError
			if !errors.As(err, &ie) && !errors.Is(err, evolve.ErrSchemaMismatch) {
				t.Fatalf("error %v is not bad input", err)
			}
		}
	})
}

// A damaged Parquet file of 7 KB whose zstd frames each declare a content
// of gigabytes is refused as bad input without allocating them: the
// reader's decoder sized its output by the frames' word, 4 GB a read, and
// a fuzzer's process ran out of memory (the input is kept in the fuzz
// corpus).
func TestAParquetFileWhoseFramesDeclareGigabytesIsBadInput(t *testing.T) {
	raw, err := os.ReadFile("testdata/fuzz/FuzzParquetFile/87ae8601a6d7848b")
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSuffix(strings.TrimPrefix(strings.Split(string(raw), "\n")[1], "[]byte("), ")")
	data, err := strconv.Unquote(line)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "in.parquet")
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err = readParquet(path)
	runtime.ReadMemStats(&after)
	var ie *evolve.InputError
	if !errors.As(err, &ie) {
		t.Fatalf("got %v, want bad input", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 256<<20 {
		t.Fatalf("reading a %d-byte file allocated %d MB", len(data), n>>20)
	}
}
