package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/stratadb/strata/internal/testenv"
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
	if code, _, errOut := run(t, nil, "append", u, mars); code != 1 || !strings.Contains(errOut, "Mars/Olympus") {
		t.Fatalf("append a file in Mars/Olympus: exit %d %s", code, errOut)
	}
}
