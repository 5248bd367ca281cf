package evolve_test

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// Rows sent again after their table's schema changed (a column added, one
// renamed, one made nullable) have the digest they had, so an append sent
// again is known as the same; other rows do not.
func TestRowsDigestOutlivesASchemaChange(t *testing.T) {
	v1 := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "reward", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	rows := func(body string) arrow.RecordBatch {
		rec, _, err := array.RecordFromJSON(testenv.Arrow, v1, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	sent := rows(`[{"id": 1, "reward": 0.5}, {"id": 2, "reward": 1.5}]`)
	defer sent.Release()
	digest := func(sc *arrow.Schema, rec arrow.RecordBatch) uint64 {
		t.Helper()
		c, err := evolve.Conform(sc, rec, evolve.ConformOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		d, err := format.RowsDigest(sc, []arrow.RecordBatch{c})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := digest(v1, sent)
	v2, err := evolve.AlterSchema(v1, []evolve.ColumnChange{
		{Op: evolve.AddColumn, Column: "grade", Type: arrow.BinaryTypes.String},
		{Op: evolve.RenameColumn, Column: "reward", To: "score"},
		{Op: evolve.WidenColumn, Column: "id", Nullable: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if again := digest(v2, sent); again != first {
		t.Errorf("the same rows after the schema changed: digest %016x, first %016x", again, first)
	}
	other := rows(`[{"id": 1, "reward": 0.5}, {"id": 2, "reward": 2.5}]`)
	defer other.Release()
	if d := digest(v2, other); d == first {
		t.Error("other rows have the first rows' digest")
	}
}
