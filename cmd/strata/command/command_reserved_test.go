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

	"github.com/stratadb/strata/harness/testenv"
)

// A column named like a column the change feed adds (_change, _version)
// would be shadowed in every change: create from a schema file, create
// --like a Parquet file, and alter's add and rename refuse it, naming the
// column and the reserved names, and leave the table as it was.
func TestAReservedColumnNameIsRefusedByCreateAndAlter(t *testing.T) {
	dir := t.TempDir()
	u := "file://" + dir + "/events"
	const reserved = "the names _change, _version and _unit are reserved"
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"fields":[{"name":"id","type":"int64"},{"name":"_version","type":"int64"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, nil, "create", u, "--schema", bad); code == 0 || !strings.Contains(errOut, `column "_version"`) || !strings.Contains(errOut, reserved) {
		t.Fatalf("create with a _version column: exit %d %s", code, errOut)
	}
	like := filepath.Join(dir, "like.parquet")
	schema := arrow.NewSchema([]arrow.Field{{Name: "_change", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append("x")
	rec := b.NewRecordBatch()
	defer rec.Release()
	f, err := os.Create(like)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WriteParquet(t, f, rec, parquet.NewWriterProperties(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if code, _, errOut := run(t, nil, "create", u, "--like", like); code == 0 || !strings.Contains(errOut, `column "_change"`) || !strings.Contains(errOut, reserved) {
		t.Fatalf("create --like a file with a _change column: exit %d %s", code, errOut)
	}
	if _, err := os.Stat(dir + "/events"); err == nil {
		t.Fatal("a refused create left a table behind")
	}
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"fields":[{"name":"id","type":"int64"},{"name":"v","type":"int64"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, nil, "create", u, "--schema", good); code != 0 {
		t.Fatalf("create: exit %d %s", code, errOut)
	}
	for _, args := range [][]string{{"--add-column", "_version:int64"}, {"--rename-column", "v:_change"}} {
		code, _, errOut := run(t, nil, append([]string{"alter", u}, args...)...)
		if code == 0 || !strings.Contains(errOut, reserved) || strings.Contains(errOut, "%!") {
			t.Errorf("alter %s: exit %d %s", strings.Join(args, " "), code, errOut)
		}
	}
	if code, out, _ := run(t, nil, "versions", u); code != 0 || strings.Count(strings.TrimSpace(out), "\n") != 1 {
		t.Fatalf("a refused alter committed a version:\n%s", out)
	}
}
