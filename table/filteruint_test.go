package table_test

import (
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
)

// An integer literal up to 2^64-1 compares exactly with a uint64 column's
// values (not as a float, which makes 2^64-2 equal to 2^64-1), and with an
// int64 column's as the number it is.
func TestIntegerLiteralsUpTo2To64CompareExactly(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "n", Type: arrow.PrimitiveTypes.Int64},
		{Name: "u", Type: arrow.PrimitiveTypes.Uint64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{0, 1, 2}, nil)
	b.Field(1).(*array.Uint64Builder).AppendValues([]uint64{1, 1 << 63, 1<<64 - 1}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	for filter, want := range map[string][]int64{
		"u = 18446744073709551615":                               {2},
		"u = 18446744073709551614":                               nil,
		"u > 9223372036854775807":                                {1, 2},
		"u IN (18446744073709551615, 1)":                         {0, 2},
		"u BETWEEN 9223372036854775808 AND 18446744073709551614": {1},
		"n < 18446744073709551615":                               {0, 1, 2},
		"n = 18446744073709551615":                               nil,
		"u + 0 = 9223372036854775808 OR u = 9223372036854775808": {1},
		"18446744073709551615 = u":                               {2},
		"u != 18446744073709551615 AND u >= 9223372036854775808": {1},
	} {
		p, err := expr.ParseFilter(filter)
		if err != nil {
			t.Errorf("%s: %v", filter, err)
			continue
		}
		var got []int64
		for out, err := range table.ScanBatches(ctx, schema, []arrow.RecordBatch{rec}, table.ScanOptions{Filter: p}) {
			if err != nil {
				t.Fatalf("%s: %v", filter, err)
			}
			got = append(got, out.Column(0).(*array.Int64).Int64Values()...)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s kept rows %v, want %v", filter, got, want)
		}
	}
}
