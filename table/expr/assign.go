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

	"github.com/stratadb/strata/table/value"
)

// Assignment sets a column to a constant in the rows an update changes.
type Assignment struct {
	Column string
	Value  value.Value // KindNone: null
	// list: the value was written as a list ([…]), which an update
	// cannot set; BindAssignments refuses it naming the column's type.
	list bool
}

// ParseAssignments reads "col = literal[, col = literal]…": literals as a
// filter's (integers, decimals, 'strings', "strings", true, false), null,
// or for a float column NaN, Infinity and -Infinity (any case; inf too);
// column names as a filter's (backticks around any other name). A list
// ([1, 2]) parses, to be refused by BindAssignments, which knows the
// column's type.
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
	v, err := p.literal()
	a.Value = v
	return a, err
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
			return nil, fmt.Errorf("%w: %s = %s: %v", ErrBadAssignment, QuoteColumn(a.Column), a.Value, err)
		}
		arr.Release()
	}
	return out, nil
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

// Assign returns rec with the bound assignments as applied to every row.
// The caller releases the result.
func Assign(mem memory.Allocator, rec arrow.RecordBatch, as []Assignment) (arrow.RecordBatch, error) {
	cols := slices.Clone(rec.Columns())
	var made []arrow.Array
	defer func() {
		for _, a := range made {
			a.Release()
		}
	}()
	n := int(rec.NumRows())
	for _, a := range as {
		i := rec.Schema().FieldIndices(a.Column)[0]
		arr, err := constantArray(mem, rec.Schema().Field(i).Type, a.Value, n)
		if err != nil {
			return nil, err
		}
		made = append(made, arr)
		cols[i] = arr
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(n)), nil
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
