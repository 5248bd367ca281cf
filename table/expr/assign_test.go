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

// An update sets columns to expressions over the row as it was before the
// update: arithmetic of columns and literals, a copy of another column,
// and every assignment reads the old values; what a column cannot hold is
// refused naming the column, the expression and the row.
func TestAnUpdateSetsExpressionsOverTheOldRow(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "reward", Type: arrow.PrimitiveTypes.Float64},
		{Name: "step", Type: arrow.PrimitiveTypes.Int32},
		{Name: "run", Type: arrow.BinaryTypes.String},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "weight", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.Float64Builder).AppendValues([]float64{0.5, 2}, nil)
	b.Field(1).(*array.Int32Builder).AppendValues([]int32{3, 2147483647}, nil)
	b.Field(2).(*array.StringBuilder).AppendValues([]string{"a", "b"}, nil)
	b.Field(3).(*array.StringBuilder).AppendValues([]string{"x", ""}, []bool{true, false})
	b.Field(4).(*array.Int64Builder).AppendValues([]int64{10, 0}, []bool{true, false})
	rec := b.NewRecordBatch()
	defer rec.Release()

	set := func(s string) (arrow.RecordBatch, error) {
		as, err := expr.ParseAssignments(s)
		if err == nil {
			as, err = expr.BindAssignments(schema, as)
		}
		if err != nil {
			return nil, err
		}
		return expr.Assign(memory.DefaultAllocator, rec, as)
	}
	out, err := set("reward = reward * 2 + step, weight = weight / 4, note = run, step = -step")
	if err != nil {
		t.Fatal(err)
	}
	if r := out.Column(0).(*array.Float64); r.Value(0) != 4 || r.Value(1) != 4+2147483647 {
		t.Errorf("reward = reward * 2 + step: %v", r)
	}
	if w := out.Column(4).(*array.Int64); w.Value(0) != 2 || !w.IsNull(1) {
		t.Errorf("weight = weight / 4 (10, null): %v", w)
	}
	if n := out.Column(3).(*array.String); n.Value(0) != "a" || n.Value(1) != "b" {
		t.Errorf("note = run: %v", n)
	}
	if s := out.Column(1).(*array.Int32); s.Value(0) != -3 || s.Value(1) != -2147483647 {
		t.Errorf("step = -step: %v", s)
	}
	out.Release()

	// A constant stays a constant, true and false included.
	if out, err = set("run = 'z', note = null"); err != nil {
		t.Fatal(err)
	}
	if n := out.Column(2).(*array.String); n.Value(0) != "z" || n.Value(1) != "z" || out.Column(3).NullN() != 2 {
		t.Errorf("constants: %v %v", n, out.Column(3))
	}
	out.Release()

	for s, want := range map[string]string{
		"step = step + 1":                 "step = (step + 1) gives 2147483648 for the row with step = 2147483647, which step of type int32 cannot hold",
		"step = reward * 2":               "step is of type int32 and (reward * 2) gives a float",
		"reward = weight":                 "reward = weight gives null",
		"step = step / 0":                 "gives null (a null operand, a division by zero or an overflow) for the row with step = 3",
		"run = run + 1":                   "arithmetic on numbers only",
		"reward = nope * 2":               "nope",
		"run = note":                      "note is null in a row it updates",
		"step = step +":                   "bad assignment",
		"step = step step":                "unexpected \"step\"",
		"weight = reward":                 "an integer column takes integer arithmetic only",
		"run = step":                      "which an expression cannot set",
		"reward = reward * 1e308 * 1e308": "gives null (a null operand, a division by zero or an overflow)",
	} {
		out, err := set(s)
		if err == nil {
			out.Release()
		}
		if !errors.Is(err, expr.ErrBadAssignment) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrBadAssignment saying %q", s, err, want)
		}
	}
}

// A name of words joined by dots is one column, written bare as a
// qualified name (target.step) or between backticks; a dot not followed by
// a word is not part of it.
func TestQualifiedNamesAreOneColumn(t *testing.T) {
	for s, want := range map[string][]string{
		"target.step < source.step": {"target.step", "source.step"},
		"`a.b` = 1 AND a.b.c > 2":   {"a.b", "a.b.c"},
		"x > 1.5":                   {"x"},
	} {
		p, err := expr.ParseFilter(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got := p.Columns(); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s reads %v, want %v", s, got, want)
		}
	}
	if _, err := expr.ParseFilter("x. > 1"); err == nil {
		t.Error("x. > 1 parsed")
	}
}
