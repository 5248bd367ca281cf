package compactor_test

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/value"
)

// A Parquet writer leaves out a row group's max statistic when the
// greatest string is longer than its limit (4 KiB) and keeps the min; the
// max then reads as empty. A filter must not take it for a bound — nor a
// compaction that copies pages write it into the new fragment as one —
// nor a sort by the column, whose small row groups often end on such a
// string: each read finds every row the filter matches.
func TestALongStringsMissingMaxIsNoBound(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	long := "z" + strings.Repeat("H", 5000)
	b, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commit.Create(ctx, b, schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, vals := range [][]string{{"a", long}, {"c", "d"}, {long + "1", "b"}} {
		bld := array.NewRecordBuilder(testenv.Allocator(t), schema)
		for i, v := range vals {
			bld.Field(0).(*array.Int64Builder).Append(int64(i))
			bld.Field(1).(*array.StringBuilder).Append(v)
		}
		rec := bld.NewRecordBatch()
		_, err := tb.Append(ctx, rec)
		rec.Release()
		bld.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	count := func(what string) {
		t.Helper()
		var n int64
		for rec, err := range readSnapshot(t, b).Scan(ctx, table.ScanOptions{Filter: expr.Gt("s", value.String("e"))}) {
			if err != nil {
				t.Fatal(err)
			}
			n += rec.NumRows()
		}
		if n != 2 {
			t.Fatalf("%s: s > \"e\" found %d rows, want the 2 long ones", what, n)
		}
	}
	count("as appended")
	res, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil)
	if err != nil || res.BinsCopied != 1 {
		t.Fatalf("compaction: %+v, %v; want its pages copied", res, err)
	}
	count("after a compaction copying pages")
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.ClusterBy, Columns: []string{"s"}}); err != nil {
		t.Fatal(err)
	}
	if res, err := compactor.Compact(ctx, b, &compactor.Policy{}, nil); err != nil || res.BinsSorted != 1 {
		t.Fatalf("sorting compaction: %+v, %v", res, err)
	}
	count("after a sort by the column")
}
