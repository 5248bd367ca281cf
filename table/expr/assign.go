package expr

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// Assignment sets a column in the rows an update changes: to a constant
// (Value), or to an expression over the row's columns (Expr, when not nil).
type Assignment struct {
	Column string
	Value  value.Value // KindNone: null
	// Expr, when not nil, is computed for each row from the row as it was
	// before the update (every assignment reads the old values), as a
	// filter computes it: a null operand, a division by zero or an
	// integer overflow give null, which a column that is not nullable
	// refuses (the update fails; nothing changes).
	Expr Expr
	// list: the value was written as a list ([…]), which an update
	// cannot set; BindAssignments refuses it naming the column's type.
	list bool
}

// ParseAssignments reads "col = value[, col = value]…": a value is a
// literal as a filter's (integers, decimals, 'strings', "strings", true,
// false), null, for a float column NaN, Infinity and -Infinity (any case;
// inf too), or an expression over the row's columns as a filter writes
// one (reward * 2, (a + b) / 2, -x, step % 10, other_column); column
// names as a filter's (backticks around any other name). A list ([1, 2])
// parses, to be refused by BindAssignments, which knows the column's type.
func ParseAssignments(s string) ([]Assignment, error) {
	toks, err := lex(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadAssignment, strings.TrimPrefix(err.Error(), ErrBadPredicate.Error()+": "))
	}
	p := &parser{toks: toks}
	var out []Assignment
	for {
		col := p.next()
		if (col.kind != tokWord && col.kind != tokIdent) || col.text == "" {
			return nil, fmt.Errorf("%w: %q: want a column name, got %q", ErrBadAssignment, s, col.text)
		}
		if op := p.next(); op.text != "=" {
			return nil, fmt.Errorf("%w: %q: want = after %s, got %q", ErrBadAssignment, s, QuoteColumn(col.text), op.text)
		}
		a, err := p.assigned(col.text)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrBadAssignment, s, err)
		}
		out = append(out, a)
		if p.done() {
			return out, nil
		}
		if t := p.next(); t.text != "," {
			return nil, fmt.Errorf("%w: %q: want , between assignments, got %q", ErrBadAssignment, s, t.text)
		}
	}
}

// assigned reads the value assigned to column col: null, a float's
// special value, a list (to be refused once bound), or a literal.
func (p *parser) assigned(col string) (Assignment, error) {
	a := Assignment{Column: col}
	word := func(at int) string {
		if at < len(p.toks) && p.toks[at].kind == tokWord {
			return strings.ToLower(p.toks[at].text)
		}
		return ""
	}
	special := map[string]float64{"nan": math.NaN(), "inf": math.Inf(1), "infinity": math.Inf(1)}
	if v, ok := special[word(p.pos)]; ok {
		p.pos++
		a.Value = value.Float(v)
		return a, nil
	}
	if v, ok := special[word(p.pos+1)]; ok && p.at(tokArith, "-") && !math.IsNaN(v) {
		p.pos += 2
		a.Value = value.Float(-v)
		return a, nil
	}
	switch {
	case word(p.pos) == "null":
		p.next()
		return a, nil
	case p.at(tokPunct, "["):
		a.list = true
		for depth := 0; ; {
			if p.done() {
				return a, fmt.Errorf("a list without its closing ]")
			}
			switch p.next().text {
			case "[":
				depth++
			case "]":
				depth--
			}
			if depth == 0 {
				return a, nil
			}
		}
	}
	// A literal alone is a constant; anything else an expression.
	at := p.pos
	if v, err := p.literal(); err == nil && (p.done() || p.at(tokPunct, ",")) {
		a.Value = v
		return a, nil
	}
	p.pos = at
	e, err := p.sum()
	if err != nil {
		return a, err
	}
	if !p.done() && !p.at(tokPunct, ",") {
		return a, fmt.Errorf("unexpected %q after %s", p.toks[p.pos].text, e)
	}
	a.Expr = e
	return a, nil
}

// ErrBadAssignment: an update's assignments do not parse, or do not fit
// the table's schema.
var ErrBadAssignment = errors.New("table: bad assignment")

// BindAssignments checks assignments against schema: each column exists
// once, is a column of a scalar type (a number, string, binary, boolean,
// date or timestamp), and takes its value (null only where nullable).
func BindAssignments(schema *arrow.Schema, as []Assignment) ([]Assignment, error) {
	if len(as) == 0 {
		return nil, fmt.Errorf("%w: an update sets at least one column", ErrBadAssignment)
	}
	out := make([]Assignment, len(as))
	for i, a := range as {
		if slices.IndexFunc(as[:i], func(b Assignment) bool { return b.Column == a.Column }) >= 0 {
			return nil, fmt.Errorf("%w: %s is set twice", ErrBadAssignment, QuoteColumn(a.Column))
		}
		fi := schema.FieldIndices(a.Column)
		if len(fi) == 0 {
			return nil, fmt.Errorf("%w: the table has no column %s", ErrBadAssignment, QuoteColumn(a.Column))
		}
		f := schema.Field(fi[0])
		if value.KindOf(f.Type) == value.KindNone {
			return nil, fmt.Errorf("%w: %s is of type %s, which an update cannot set", ErrBadAssignment, QuoteColumn(a.Column), f.Type)
		}
		out[i] = Assignment{Column: a.Column}
		if a.Expr != nil {
			if err := bindAssigned(schema, f, a.Expr); err != nil {
				return nil, err
			}
			out[i].Expr = a.Expr
			continue
		}
		if a.list {
			return nil, fmt.Errorf("%w: %s is of type %s: an update sets a column to one value (a number, a string, true, false or null), and cannot set a list", ErrBadAssignment, QuoteColumn(a.Column), f.Type)
		}
		if a.Value.Kind == value.KindNone {
			if !f.Nullable {
				return nil, fmt.Errorf("%w: %s is not nullable", ErrBadAssignment, QuoteColumn(a.Column))
			}
			continue
		}
		if x, ok := specialFloat(a.Value); ok && value.KindOf(f.Type) == value.KindFloat {
			a.Value = value.Float(x) // "NaN": JSON has no number for it
		}
		v, err := coerce(schema, a.Column, a.Value)
		if err != nil {
			return nil, fmt.Errorf("%w: %s of type %s cannot take %s", ErrBadAssignment, QuoteColumn(a.Column), f.Type, a.Value)
		}
		out[i].Value = v
		// The value must convert to the column's type: built once here,
		// so that a bad one fails before anything is read.
		arr, err := constantArray(memory.DefaultAllocator, f.Type, v, 1)
		if err != nil {
			return nil, fmt.Errorf("%w: %s of type %s cannot hold %s (out of its range, or not of its kind)", ErrBadAssignment, QuoteColumn(a.Column), f.Type, a.Value)
		}
		arr.Release()
	}
	return out, nil
}

// bindAssigned checks that e, computed for each row, fits column f: a
// number for a column of integers or floats (an integer for integers), or
// a column of f's own type copied as it is.
func bindAssigned(schema *arrow.Schema, f arrow.Field, e Expr) error {
	k, err := e.bindExpr(schema)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), ErrBadPredicate.Error()+": ")
		return fmt.Errorf("%w: %s = %s: %s", ErrBadAssignment, QuoteColumn(f.Name), e, msg)
	}
	if c, ok := e.(Col); ok {
		if src := schema.Field(schema.FieldIndices(string(c))[0]); arrow.TypeEqual(src.Type, f.Type) {
			return nil
		}
	}
	switch {
	case isIntType(f.Type) && (k == value.KindInt || k == value.KindUint):
		return nil
	case isFloatType(f.Type) && numeric(k):
		return nil
	case isIntType(f.Type) && k == value.KindFloat:
		return fmt.Errorf("%w: %s is of type %s and %s gives a float: an integer column takes integer arithmetic only", ErrBadAssignment, QuoteColumn(f.Name), f.Type, e)
	}
	return fmt.Errorf("%w: %s is of type %s, which an expression cannot set: it takes a constant, or a column of type %s as it is (arithmetic sets integer and float columns)", ErrBadAssignment, QuoteColumn(f.Name), f.Type, f.Type)
}

func isIntType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

func isFloatType(t arrow.DataType) bool {
	return t.ID() == arrow.FLOAT32 || t.ID() == arrow.FLOAT64
}

// specialFloat reads a string that names NaN or an infinity ("NaN",
// "Infinity", "-Infinity", "inf"; any case), as a float column takes it
// from JSON, which has no number for them.
func specialFloat(v value.Value) (float64, bool) {
	if v.Kind != value.KindString {
		return 0, false
	}
	switch strings.ToLower(v.S) {
	case "nan":
		return math.NaN(), true
	case "inf", "+inf", "infinity", "+infinity":
		return math.Inf(1), true
	case "-inf", "-infinity":
		return math.Inf(-1), true
	}
	return 0, false
}

// Assign returns rec with the bound assignments as applied to every row;
// expressions read the rows as rec holds them. The caller releases the
// result. A value an expression gives that the column cannot hold (a null
// in a column that is not nullable, a number past the column's width) is
// ErrBadAssignment naming the column, the expression and the row's values.
func Assign(mem memory.Allocator, rec arrow.RecordBatch, as []Assignment) (arrow.RecordBatch, error) {
	cols := slices.Clone(rec.Columns())
	var made []arrow.Array
	defer func() {
		for _, a := range made {
			a.Release()
		}
	}()
	n := int(rec.NumRows())
	var byName map[string]arrow.Array
	for _, a := range as {
		i := rec.Schema().FieldIndices(a.Column)[0]
		f := rec.Schema().Field(i)
		var arr arrow.Array
		var err error
		switch c, isCol := a.Expr.(Col); {
		case a.Expr == nil:
			arr, err = constantArray(mem, f.Type, a.Value, n)
		case isCol && arrow.TypeEqual(rec.Column(rec.Schema().FieldIndices(string(c))[0]).DataType(), f.Type):
			arr = rec.Column(rec.Schema().FieldIndices(string(c))[0])
			if !f.Nullable && arr.NullN() > 0 {
				err = fmt.Errorf("%w: %s = %s: %s is not nullable and %s is null in a row it updates", ErrBadAssignment, QuoteColumn(f.Name), c, QuoteColumn(f.Name), c)
			} else {
				arr.Retain()
			}
		default:
			if byName == nil {
				byName = map[string]arrow.Array{}
				for j, fj := range rec.Schema().Fields() {
					byName[fj.Name] = rec.Column(j)
				}
			}
			arr, err = computed(mem, f, a.Expr, byName, n)
		}
		if err != nil {
			return nil, err
		}
		made = append(made, arr)
		cols[i] = arr
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(n)), nil
}

// computed is e for each of the n rows of cols, as an array of f's type
// (an integer or float type: bindAssigned).
func computed(mem memory.Allocator, f arrow.Field, e Expr, cols map[string]arrow.Array, n int) (arrow.Array, error) {
	b := array.NewBuilder(mem, f.Type)
	defer b.Release()
	b.Reserve(n)
	for i := range n {
		v, ok := e.eval(cols, i)
		if ok && v.Kind == value.KindFloat && (math.IsInf(v.F, 0) || math.IsNaN(v.F)) && !readsNonFinite(e, cols, i) {
			ok = false // a float overflow, as an integer's: null
		}
		if !ok {
			if !f.Nullable {
				return nil, fmt.Errorf("%w: %s = %s gives null (a null operand, a division by zero or an overflow) for the row %s, and %s is not nullable", ErrBadAssignment, QuoteColumn(f.Name), e, rowValues(e, cols, i), QuoteColumn(f.Name))
			}
			b.AppendNull()
			continue
		}
		if !appendNumber(b, v) {
			return nil, fmt.Errorf("%w: %s = %s gives %s for the row %s, which %s of type %s cannot hold", ErrBadAssignment, QuoteColumn(f.Name), e, v, rowValues(e, cols, i), QuoteColumn(f.Name), f.Type)
		}
	}
	return b.NewArray(), nil
}

// readsNonFinite tells whether e reads a NaN or an infinity in row i: a
// non-finite result from finite values is an overflow.
func readsNonFinite(e Expr, cols map[string]arrow.Array, i int) bool {
	for _, c := range e.exprColumns() {
		if v, ok := format.ValueAt(cols[c], i); ok && v.Kind == value.KindFloat && (math.IsInf(v.F, 0) || math.IsNaN(v.F)) {
			return true
		}
	}
	return false
}

// rowValues names the values e read in row i, for an error.
func rowValues(e Expr, cols map[string]arrow.Array, i int) string {
	var parts []string
	for _, c := range e.exprColumns() {
		v, ok := format.ValueAt(cols[c], i)
		s := "null"
		if ok {
			s = v.String()
		}
		parts = append(parts, QuoteColumn(c)+" = "+s)
	}
	return "with " + strings.Join(parts, ", ")
}

// appendNumber appends v to an integer or float builder: false when the
// builder's type cannot hold it.
func appendNumber(b array.Builder, v value.Value) bool {
	if v.Kind == value.KindFloat {
		switch b := b.(type) {
		case *array.Float64Builder:
			b.Append(v.F)
			return true
		case *array.Float32Builder:
			b.Append(float32(v.F))
			return true
		}
		return false
	}
	i, signed := asInt(v)
	u, unsigned := v.U, v.Kind == value.KindUint
	if !unsigned && i >= 0 {
		u, unsigned = uint64(i), true
	}
	switch b := b.(type) {
	case *array.Float64Builder:
		b.Append(asFloat(v))
	case *array.Float32Builder:
		b.Append(float32(asFloat(v)))
	case *array.Int64Builder:
		if !signed {
			return false
		}
		b.Append(i)
	case *array.Int32Builder:
		if !signed || i < math.MinInt32 || i > math.MaxInt32 {
			return false
		}
		b.Append(int32(i))
	case *array.Int16Builder:
		if !signed || i < math.MinInt16 || i > math.MaxInt16 {
			return false
		}
		b.Append(int16(i))
	case *array.Int8Builder:
		if !signed || i < math.MinInt8 || i > math.MaxInt8 {
			return false
		}
		b.Append(int8(i))
	case *array.Uint64Builder:
		if !unsigned {
			return false
		}
		b.Append(u)
	case *array.Uint32Builder:
		if !unsigned || u > math.MaxUint32 {
			return false
		}
		b.Append(uint32(u))
	case *array.Uint16Builder:
		if !unsigned || u > math.MaxUint16 {
			return false
		}
		b.Append(uint16(u))
	case *array.Uint8Builder:
		if !unsigned || u > math.MaxUint8 {
			return false
		}
		b.Append(uint8(u))
	default:
		return false
	}
	return true
}

// constantArray is n copies of v (KindNone: null) as an array of type t.
func constantArray(mem memory.Allocator, t arrow.DataType, v value.Value, n int) (arrow.Array, error) {
	if v.Kind == value.KindNone {
		return array.MakeArrayOfNull(mem, t, n), nil
	}
	if v.Kind == value.KindFloat && (math.IsNaN(v.F) || math.IsInf(v.F, 0)) {
		return specialFloats(mem, t, v.F, n)
	}
	var one string
	switch v.Kind {
	case value.KindInt:
		one = strconv.FormatInt(v.I, 10)
	case value.KindUint:
		one = strconv.FormatUint(v.U, 10)
	case value.KindFloat:
		one = strconv.FormatFloat(v.F, 'g', -1, 64)
	case value.KindBool:
		one = strconv.FormatBool(v.B)
	case value.KindString:
		b, _ := json.Marshal(v.S)
		one = string(b)
	case value.KindBytes:
		b, _ := json.Marshal(v.X) // base64, as Arrow's JSON reads binary
		one = string(b)
	}
	var sb strings.Builder
	sb.WriteByte('[')
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(one)
	}
	sb.WriteByte(']')
	arr, _, err := array.FromJSON(mem, t, strings.NewReader(sb.String()))
	return arr, err
}

// specialFloats is n copies of NaN or an infinity (which JSON, and so
// array.FromJSON, cannot write) as an array of float type t.
func specialFloats(mem memory.Allocator, t arrow.DataType, f float64, n int) (arrow.Array, error) {
	switch t.ID() {
	case arrow.FLOAT64:
		b := array.NewFloat64Builder(mem)
		defer b.Release()
		for range n {
			b.Append(f)
		}
		return b.NewArray(), nil
	case arrow.FLOAT32:
		b := array.NewFloat32Builder(mem)
		defer b.Release()
		for range n {
			b.Append(float32(f))
		}
		return b.NewArray(), nil
	}
	return nil, fmt.Errorf("%s cannot hold %v", t, f)
}
