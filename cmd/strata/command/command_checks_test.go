package command

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/harness/testenv"
)

// writeZonedParquet writes a one-row Parquet file whose column "at" is a
// timestamp in zone, with the Arrow schema stored so that the zone is read
// back as written.
func writeZonedParquet(t *testing.T, path, zone string) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: zone}}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.TimestampBuilder).Append(1_700_000_000_000_000)
	rec := b.NewRecordBatch()
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WriteParquet(t, f, rec, parquet.NewWriterProperties(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
}

// A time zone Arrow cannot resolve is refused when the schema comes in,
// naming the column and the zone: a table holding it would print every
// value as "...".
func TestCreateLikeRefusesAnUnknownTimeZone(t *testing.T) {
	dir := t.TempDir()
	mars := filepath.Join(dir, "mars.parquet")
	writeZonedParquet(t, mars, "Mars/Olympus")
	u := "file://" + dir + "/t"
	code, out, errOut := run(t, nil, "create", u, "--like", mars)
	if code == 0 || !strings.Contains(errOut, `field "at"`) || !strings.Contains(errOut, `unknown time zone "Mars/Olympus"`) {
		t.Fatalf("create --like a file in Mars/Olympus: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(dir + "/t"); err == nil {
		t.Fatal("the refused create left a table behind")
	}
	paris := filepath.Join(dir, "paris.parquet")
	writeZonedParquet(t, paris, "Europe/Paris")
	if code, _, errOut := run(t, nil, "create", u, "--like", paris); code != 0 {
		t.Fatalf("create --like a file in Europe/Paris: exit %d %s", code, errOut)
	}
	if code, _, errOut := run(t, nil, "append", u, paris); code != 0 {
		t.Fatalf("append: exit %d %s", code, errOut)
	}
	if code, out, _ := run(t, nil, "scan", u, "--format", "csv"); code != 0 || strings.Contains(out, "...") || !strings.Contains(out, "2023-11-14") {
		t.Fatalf("scan: exit %d\n%s", code, out)
	}
	// A file in an unknown zone does not append to a table in a known one.
	if code, _, errOut := run(t, nil, "append", u, mars); code != 4 || !strings.Contains(errOut, "Mars/Olympus") {
		t.Fatalf("append a file in Mars/Olympus: exit %d %s", code, errOut)
	}
}

// A numeric flag outside its range is a usage error (exit 2) naming the
// flag and the range, before the verb does anything (it opens no bucket):
// a worker told to append -5 rows acknowledged them, a demo with -5
// workers panicked, and a self-test of 100,000 racers ran out of memory.
func TestNumericFlagsOutsideTheirRangeAreUsageErrors(t *testing.T) {
	const u = "mem://t"
	for _, c := range []struct{ args, says string }{
		{"worker " + u + " --rows -5 --appends 1", "--rows -5: want 1 to 1000000000"},
		{"worker " + u + " --rows 0 --appends 1", "--rows 0: want 1 to 1000000000"},
		{"worker " + u + " --worker -1 --appends 1", "--worker -1: want 0 to 9223372035"},
		{"worker " + u + " --appends -5", "--appends -5: want at least 0"},
		{"worker " + u + " --every -1s --appends 1", "--every -1s: want at least 0s"},
		{"selftest " + u + " --racers 100000", "--racers 100000: want 1 to 256"},
		{"selftest " + u + " --racers 0", "--racers 0: want 1 to 256"},
		{"demo " + u + " --workers -5", "--workers -5: want 1 to 9223372036"},
		{"demo " + u + " --appends 0", "--appends 0: want at least 1"},
		{"versions " + u + " --limit -5", "--limit -5: want at least 0"},
		{"scan " + u + " --limit -5", "--limit -5: want at least 0"},
		{"compact " + u + " --target-rows 0", "--target-rows 0: want at least 1"},
		{"gc " + u + " --keep-versions 0", "--keep-versions 0: want at least 1"},
		{"bench --phases ingest --rows 0", "--rows 0: want at least 1"},
	} {
		env := &Env{Open: func(_ context.Context, u string) (blob.Bucket, error) {
			t.Errorf("%s: opened %s", c.args, u)
			return nil, errors.New("a refused command opened a bucket")
		}}
		code, out, errOut := run(t, env, strings.Fields(c.args)...)
		if code != 2 || !strings.Contains(errOut, c.says) || out != "" {
			t.Errorf("%s: exit %d, want 2 saying %q\n%s%s", c.args, code, c.says, out, errOut)
		}
	}
}
