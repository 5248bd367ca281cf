package lakehouse_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/lakehouse"
)

// An export tells its progress after each version it describes: 1, 2, …
// of the versions it adds.
func TestExportTellsItsProgressByVersions(t *testing.T) {
	dir := t.TempDir()
	b, err := blob.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	if _, err := commit.Create(ctx, b, schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		rec, _, err := array.RecordFromJSON(testenv.Arrow, schema, strings.NewReader(`[{"id": 1}]`))
		if err != nil {
			t.Fatal(err)
		}
		_, err = tb.Append(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	var told []int64
	res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: "file://" + filepath.ToSlash(dir),
		OnProgress: func(done, total int64) {
			if total != 6 {
				t.Errorf("told a total of %d versions, want 6", total)
			}
			told = append(told, done)
		}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Added) != 6 || !slices.Equal(told, []int64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("added %v, told %v", res.Added, told)
	}
}
