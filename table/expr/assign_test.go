package expr_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/table/expr"
)

// An update sets a float column to NaN, Infinity or -Infinity (as JSON
// lines and Python's json write them), and a list given to any column is
// refused by name and type, not as a bad predicate.
func TestAnUpdateSetsNaNAndRefusesAListByName(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "x", Type: arrow.PrimitiveTypes.Float64},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.Float64Builder).Append(1.5)
	b.Field(1).(*array.Int64Builder).Append(1)
	b.Field(2).AppendNull()
	rec := b.NewRecordBatch()
	defer rec.Release()
	for set, want := range map[string]float64{"x = NaN": math.NaN(), "x = nan": math.NaN(), "x = Infinity": math.Inf(1),
		"x = -Infinity": math.Inf(-1), "x = -inf": math.Inf(-1), "x = 2.5": 2.5} {
		as, err := expr.ParseAssignments(set)
		if err == nil {
			as, err = expr.BindAssignments(schema, as)
		}
		if err != nil {
			t.Errorf("%s: %v", set, err)
			continue
		}
		out, err := expr.Assign(memory.DefaultAllocator, rec, as)
		if err != nil {
			t.Fatalf("%s: %v", set, err)
		}
		got := out.Column(0).(*array.Float64).Value(0)
		out.Release()
		if !(got == want || math.IsNaN(got) && math.IsNaN(want)) {
			t.Errorf("%s set x to %v", set, got)
		}
	}
	for set, want := range map[string]string{
		"l = [1,2]":   "l is of type list<item: int64, nullable>",
		"n = [1, 2]":  "n is of type int64: an update sets a column to one value",
		"n = [[1],2]": "cannot set a list",
		"n = NaN":     "n of type int64 cannot take NaN",
	} {
		as, err := expr.ParseAssignments(set)
		if err == nil {
			_, err = expr.BindAssignments(schema, as)
		}
		if !errors.Is(err, expr.ErrBadAssignment) || errors.Is(err, expr.ErrBadPredicate) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrBadAssignment saying %q", set, err, want)
		}
	}
}
