package evolve

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// What a table accepts. Every path that brings rows in (the HTTP server,
// the CLI, Table.Append, Shard.Append, Create with rows) passes them
// through Conform before anything is written, so that a WAL entry or a
// fragment never holds a value the table's schema does not allow:
//
//   - the batch's Arrow data is consistent (offsets, lengths, null counts,
//     children, UTF-8), checked in full (array.ValidateRecordFull);
//   - its columns are matched to the table's by name: a missing nullable
//     column becomes nulls, a missing non-nullable one is an error, an
//     unknown one is an error unless the caller asks to ignore it;
//   - a column's type is the table's, or one that converts without loss
//     (see adapt);
//   - no non-nullable column, at any depth, holds a null.

// ErrBadInput: rows that the table cannot take as they are. Always
// wrapped in an *InputError.
var ErrBadInput = errors.New("rows do not fit the table")

// InputError says where input went wrong: the row (counted from 0 over
// the whole input; -1 when the error is not about one row), the column
// (a path such as "meta.tags", "" when not about one column), and for a
// type mismatch both types.
type InputError struct {
	Row       int64
	Column    string
	Want, Got string
	Reason    string
	// Schema: the input's columns or types do not match the table's
	// (errors.Is(err, ErrSchemaMismatch) holds too).
	Schema bool
	// Line, when not 0, is the line of a text input (Format: "CSV",
	// "JSON") the row is on, counted from 1 as an editor counts them (a
	// CSV's header is line 1): the error names it instead of the row.
	Line   int64
	Format string
}

func (e *InputError) Error() string {
	var b strings.Builder
	b.WriteString("table: ")
	switch {
	case e.Line > 0:
		fmt.Fprintf(&b, "%s line %d: ", e.Format, e.Line)
	case e.Row >= 0:
		fmt.Fprintf(&b, "row %d: ", e.Row)
	}
	if e.Column != "" {
		fmt.Fprintf(&b, "column %q: ", e.Column)
	}
	b.WriteString(e.Reason)
	switch {
	case e.Want != "" && e.Got != "":
		fmt.Fprintf(&b, " (table: %s; input: %s)", e.Want, e.Got)
	case e.Want != "":
		fmt.Fprintf(&b, " (table: %s)", e.Want)
	case e.Got != "":
		fmt.Fprintf(&b, " (input: %s)", e.Got)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrBadInput) true, and ErrSchemaMismatch too
// when the columns or types do not match.
func (e *InputError) Is(target error) bool {
	return target == ErrBadInput || (e.Schema && target == ErrSchemaMismatch)
}

// ConformOptions shape Conform.
type ConformOptions struct {
	// IgnoreUnknown drops input columns the table does not have, instead
	// of refusing the batch.
	IgnoreUnknown bool
	// RowBase is the row number of the batch's first row in the whole
	// input, so that errors name rows as the caller counts them.
	RowBase int64
	// Allocator for converted columns (nil: the Go allocator).
	Allocator memory.Allocator
}

// Conform checks rec against the table's schema want and returns a batch
// of exactly that schema holding the same values, or an *InputError (or a
// *SchemaError when the columns do not match). The caller releases the
// result; rec is not released. It never panics on malformed input.
func Conform(want *arrow.Schema, rec arrow.RecordBatch, o ConformOptions) (out arrow.RecordBatch, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, &InputError{Row: -1, Reason: fmt.Sprintf("malformed Arrow data: %v", r)}
		}
	}()
	if o.Allocator == nil {
		o.Allocator = memory.DefaultAllocator
	}
	if err := validateRecord(rec); err != nil {
		return nil, err
	}
	got := rec.Schema()
	byName := make(map[string]int, got.NumFields())
	for i, f := range got.Fields() {
		if _, dup := byName[f.Name]; dup {
			return nil, &InputError{Row: -1, Column: f.Name, Reason: "the input has this column twice", Schema: true}
		}
		byName[f.Name] = i
	}
	// A column renamed since the input's writer learnt the schema is
	// found under its first name, its stored name (see evolve.go), when
	// no column has that name now.
	formerly := map[string]string{}
	for old, i := range FormerNames(want) {
		formerly[old] = want.Field(i).Name
	}
	if !o.IgnoreUnknown {
		for _, f := range got.Fields() {
			if len(want.FieldIndices(f.Name)) > 0 || formerly[f.Name] != "" {
				continue
			}
			if slices.Contains(RetiredNames(want), f.Name) {
				return nil, &InputError{Row: -1, Column: f.Name, Reason: fmt.Sprintf("the column was dropped from the table; leave it out (the table has %s)", fieldNames(want)), Schema: true}
			}
			return nil, &InputError{Row: -1, Column: f.Name, Reason: fmt.Sprintf("the table has no such column (it has %s)", fieldNames(want)), Schema: true}
		}
	}
	for old, now := range formerly {
		if i, ok := byName[old]; ok {
			if _, both := byName[now]; both {
				return nil, &InputError{Row: -1, Column: now, Reason: fmt.Sprintf("the input has the column under its name and under its former name %q", old), Schema: true}
			}
			byName[now] = i
		}
	}
	n := rec.NumRows()
	cols := make([]arrow.Array, 0, want.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for _, wf := range want.Fields() {
		i, ok := byName[wf.Name]
		if !ok {
			if !wf.Nullable {
				return nil, &InputError{Row: -1, Column: wf.Name, Reason: "a non-nullable column is missing", Schema: true}
			}
			cols = append(cols, array.MakeArrayOfNull(o.Allocator, wf.Type, int(n)))
			continue
		}
		a, err := adapt(o.Allocator, wf.Type, rec.Column(i), wf.Name)
		if err != nil {
			return nil, err
		}
		cols = append(cols, a)
		if err := checkNulls(wf, a, o.RowBase, wf.Name); err != nil {
			return nil, err
		}
	}
	return array.NewRecordBatch(want, cols, n), nil
}

// validateRecord checks a batch's data in full before anything reads its
// values: malformed data could otherwise make readers panic or allocate
// without bound.
func validateRecord(rec arrow.RecordBatch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &InputError{Row: -1, Reason: fmt.Sprintf("malformed Arrow data: %v", r)}
		}
	}()
	schema := rec.Schema()
	if int(rec.NumCols()) != schema.NumFields() {
		return &InputError{Row: -1, Reason: fmt.Sprintf("batch has %d columns, its schema %d", rec.NumCols(), schema.NumFields())}
	}
	for i := range schema.NumFields() {
		col := rec.Column(i)
		name := schema.Field(i).Name
		if int64(col.Len()) != rec.NumRows() {
			return &InputError{Row: -1, Column: name, Reason: fmt.Sprintf("column holds %d values, the batch %d rows", col.Len(), rec.NumRows())}
		}
		if !TypesEqual(col.DataType(), schema.Field(i).Type) {
			return &InputError{Row: -1, Column: name, Reason: "column data does not have the type its schema says"}
		}
		if err := array.ValidateFull(col); err != nil {
			return &InputError{Row: -1, Column: name, Reason: "malformed Arrow data: " + err.Error()}
		}
	}
	return nil
}

func fieldNames(s *arrow.Schema) string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// checkNulls refuses a null where the field does not allow one: in a
// non-nullable column, or in a non-nullable nested field under a parent
// value that is not null. Rows are counted from base.
func checkNulls(f arrow.Field, arr arrow.Array, base int64, path string) error {
	return nullsWhere(f, arr, path, func(i int) int64 { return base + int64(i) }, nil)
}

// nullsWhere checks arr, whose element i belongs to top-level row row(i);
// live, when not nil, says which elements are inside a non-null parent.
func nullsWhere(f arrow.Field, arr arrow.Array, path string, row func(int) int64, live func(int) bool) error {
	if !f.Nullable && arr.NullN() > 0 {
		for i := range arr.Len() {
			if arr.IsNull(i) && (live == nil || live(i)) {
				return &InputError{Row: row(i), Column: path, Want: f.Type.String(),
					Reason: "null in a non-nullable field"}
			}
		}
	}
	valid := func(i int) bool { return arr.IsValid(i) && (live == nil || live(i)) }
	switch a := arr.(type) {
	case *array.Struct:
		st := f.Type.(*arrow.StructType)
		for j := range a.NumField() {
			cf := st.Field(j)
			if err := nullsWhere(cf, a.Field(j), path+"."+cf.Name, row, valid); err != nil {
				return err
			}
		}
	case array.ListLike:
		var elem arrow.Field
		switch t := f.Type.(type) {
		case *arrow.MapType:
			elem = arrow.Field{Name: "entries", Type: t.Elem()}
		case arrow.ListLikeType:
			elem = t.ElemField()
		}
		values := a.ListValues()
		// owner[k]: the list element that value k belongs to, or -1.
		owner := make([]int32, values.Len())
		for k := range owner {
			owner[k] = -1
		}
		for i := range a.Len() {
			if !valid(i) {
				continue
			}
			lo, hi := a.ValueOffsets(i)
			for k := lo; k < hi; k++ {
				owner[k] = int32(i)
			}
		}
		sub := path + "[]"
		if _, ok := f.Type.(*arrow.MapType); ok {
			sub = path
		}
		return nullsWhere(elem, values, sub,
			func(k int) int64 { return row(int(owner[k])) },
			func(k int) bool { return owner[k] >= 0 })
	}
	return nil
}

// AdaptRead gives a column read back from a fragment the table's type:
// Parquet readers may name list elements differently, or widen a
// timestamp unit; the values are the ones written.
func AdaptRead(mem memory.Allocator, want arrow.DataType, arr arrow.Array) (arrow.Array, error) {
	out, err := adapt(mem, want, arr, "")
	if err != nil {
		return nil, fmt.Errorf("table: column of type %s read back as %s: %w", want, arr.DataType(), err)
	}
	return out, nil
}
