package table_test

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/internal/testenv"
	"github.com/stratadb/strata/table"
)

var structSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "meta", Type: arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
	), Nullable: true},
}, nil)

// structBatch holds 500 rows of structSchema.
func structBatch() arrow.RecordBatch {
	b := array.NewRecordBuilder(testenv.Arrow, structSchema)
	defer b.Release()
	meta := b.Field(1).(*array.StructBuilder)
	for i := range 500 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		meta.Append(true)
		meta.FieldBuilder(0).(*array.Int64Builder).Append(int64(i * 7))
		meta.FieldBuilder(1).(*array.StringBuilder).Append("some words that repeat, some words that repeat")
	}
	return b.NewRecordBatch()
}

// structFragment encodes structBatch as a fragment.
func structFragment(t *testing.T) []byte {
	t.Helper()
	rec := structBatch()
	defer rec.Release()
	data, _, err := table.EncodeFragment(structSchema, []arrow.RecordBatch{rec}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A fragment whose footer gives a column chunk a negative length, in a
// table with a struct column, is a CorruptError naming it. The Parquet
// reader builds the readers of a struct's fields in goroutines of its own,
// where such a length panicked out of reach of any recover: the process
// died (a server, on every scan of the fragment).
func TestAFooterWithANegativeChunkLengthIsCorrupt(t *testing.T) {
	data := structFragment(t)
	for c := range 3 { // id, meta.a, meta.b
		bad := testenv.NegativeChunkLength(t, data, c)
		_, err := table.DecodeFragment(ctx, "data/x.parquet", bad)
		var ce *table.CorruptError
		if !errors.As(err, &ce) || ce.Key != "data/x.parquet" {
			t.Fatalf("column %d: %v, want a CorruptError naming the object", c, err)
		}
	}
}

// The same fragment in a table: a scan fails with a CorruptError naming
// it, where the process died.
func TestAScanOfAFragmentWithANegativeChunkLengthFailsCleanly(t *testing.T) {
	b := memBucket(t)
	if _, err := commit.Create(ctx, b, structSchema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := structBatch()
	defer rec.Release()
	res, err := tb.Append(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	key := res.Manifest.Fragments[0].Key
	data, err := b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	scanFindsCorrupt(t, b, s, key, testenv.NegativeChunkLength(t, data, 2), "a fragment with a negative chunk length")
}
