package table

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Op is a comparison operator.
type Op string

// Comparison operators.
const (
	OpEq Op = "="
	OpNe Op = "!="
	OpLt Op = "<"
	OpLe Op = "<="
	OpGt Op = ">"
	OpGe Op = ">="
)

// Predicate selects rows. Build one with Eq, Ne, Lt, Le, Gt, Ge, In, And,
// Or, Not, Null, NotNull and Like, or read one with ParseFilter. A row is
// selected when the predicate is true, as SQL's WHERE does: a comparison
// with a null is unknown, and NOT of unknown is unknown (Bind pushes NOT
// down to the comparisons, each of which is false for a null, so that
// this holds).
type Predicate interface {
	// Columns lists the columns the predicate reads.
	Columns() []string
	String() string

	bind(s *arrow.Schema) (Predicate, error)
	// mayMatch is false only when no row described by the statistics can
	// match; allMatch is true only when every non-deleted row matches.
	mayMatch(st statsFunc) bool
	allMatch(st statsFunc) bool
	// match evaluates row i; cols maps column name to array.
	match(cols map[string]arrow.Array, i int) bool
}

// statsFunc returns a column's statistics over a set of rows and how many
// rows there are; nil stats mean unknown.
type statsFunc func(col string) (*ColumnStats, int64)

// Cmp compares a column with a value.
type Cmp struct {
	Column string
	Op     Op
	Value  Value
}

// InSet is true when the column equals one of Values (Not: when it
// equals none of them; a null is in no set, nor out of one).
type InSet struct {
	Column string
	Values []Value
	Not    bool
}

// AndOf is true when every predicate is.
type AndOf []Predicate

func Eq(col string, v Value) Predicate     { return Cmp{col, OpEq, v} }
func Ne(col string, v Value) Predicate     { return Cmp{col, OpNe, v} }
func Lt(col string, v Value) Predicate     { return Cmp{col, OpLt, v} }
func Le(col string, v Value) Predicate     { return Cmp{col, OpLe, v} }
func Gt(col string, v Value) Predicate     { return Cmp{col, OpGt, v} }
func Ge(col string, v Value) Predicate     { return Cmp{col, OpGe, v} }
func In(col string, vs ...Value) Predicate { return InSet{Column: col, Values: vs} }
func And(ps ...Predicate) Predicate        { return AndOf(ps) }

func (c Cmp) Columns() []string   { return []string{c.Column} }
func (c InSet) Columns() []string { return []string{c.Column} }
func (a AndOf) Columns() []string {
	var out []string
	for _, p := range a {
		for _, c := range p.Columns() {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

func (c Cmp) String() string { return fmt.Sprintf("%s %s %s", QuoteColumn(c.Column), c.Op, c.Value) }
func (s InSet) String() string {
	parts := make([]string, len(s.Values))
	for i, v := range s.Values {
		parts[i] = v.String()
	}
	not := ""
	if s.Not {
		not = "NOT "
	}
	return fmt.Sprintf("%s %sIN (%s)", QuoteColumn(s.Column), not, strings.Join(parts, ", "))
}
func (a AndOf) String() string {
	parts := make([]string, len(a))
	for i, p := range a {
		parts[i] = p.String()
	}
	return strings.Join(parts, " AND ")
}

// coerce converts v to the kind of column col, or fails.
func coerce(s *arrow.Schema, col string, v Value) (Value, error) {
	idx := s.FieldIndices(col)
	if len(idx) != 1 {
		return v, fmt.Errorf("%w: %s", ErrBadPredicate, noColumn(col, s))
	}
	want := KindOf(s.Field(idx[0]).Type)
	switch {
	case want == KindNone:
		return v, fmt.Errorf("%w: column %q of type %s cannot be filtered", ErrBadPredicate, col, s.Field(idx[0]).Type)
	case v.Kind == want:
		return v, nil
	case want == KindFloat && v.Kind == KindInt:
		return Float(float64(v.I)), nil
	case want == KindFloat && v.Kind == KindUint:
		return Float(float64(v.U)), nil
	case want == KindInt && v.Kind == KindUint:
		return v, fmt.Errorf("%w: column %q (%s) compared with %s, past the largest value it holds", ErrBadPredicate, col, s.Field(idx[0]).Type, v)
	case want == KindUint && v.Kind == KindInt && v.I >= 0:
		return Uint(uint64(v.I)), nil
	case want == KindBytes && v.Kind == KindString:
		return Bytes([]byte(v.S)), nil
	case want == KindString && v.Kind == KindBytes:
		return String(string(v.X)), nil
	}
	return v, fmt.Errorf("%w: column %q (%s) compared with %s", ErrBadPredicate, col, s.Field(idx[0]).Type, v)
}

func (c Cmp) bind(s *arrow.Schema) (Predicate, error) {
	switch c.Op {
	case OpEq, OpNe, OpLt, OpLe, OpGt, OpGe:
	default:
		return nil, fmt.Errorf("%w: unknown operator %q", ErrBadPredicate, c.Op)
	}
	if c.Value.Kind == KindUint && c.Value.U > math.MaxInt64 {
		if idx := s.FieldIndices(c.Column); len(idx) == 1 && KindOf(s.Field(idx[0]).Type) == KindInt {
			// No value of the column reaches it: compared as numbers,
			// exactly, row by row.
			return ExprCmp{L: Col(c.Column), Op: c.Op, R: Lit{c.Value}}.bind(s)
		}
	}
	v, err := coerce(s, c.Column, c.Value)
	c.Value = v
	return c, err
}

func (in InSet) bind(s *arrow.Schema) (Predicate, error) {
	out := InSet{Column: in.Column, Values: make([]Value, len(in.Values)), Not: in.Not}
	for i, v := range in.Values {
		var err error
		if out.Values[i], err = coerce(s, in.Column, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (a AndOf) bind(s *arrow.Schema) (Predicate, error) {
	out := make(AndOf, len(a))
	for i, p := range a {
		var err error
		if out[i], err = p.bind(s); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Bind checks p against a schema (columns exist, values fit their types)
// and converts literals to the columns' kinds.
func Bind(p Predicate, s *arrow.Schema) (Predicate, error) {
	if p == nil {
		return nil, nil
	}
	return p.bind(s)
}

func cmpHolds(op Op, c int) bool {
	switch op {
	case OpEq:
		return c == 0
	case OpNe:
		return c != 0
	case OpLt:
		return c < 0
	case OpLe:
		return c <= 0
	case OpGt:
		return c > 0
	case OpGe:
		return c >= 0
	}
	return false
}

func (c Cmp) mayMatch(st statsFunc) bool {
	s, rows := st(c.Column)
	if s == nil {
		return true
	}
	if s.Nulls >= rows {
		return false // all null: no comparison holds
	}
	if s.Min == nil || s.Max == nil {
		return true
	}
	lo, hi := Compare(*s.Min, c.Value), Compare(*s.Max, c.Value) // sign of min−v, max−v
	switch c.Op {
	case OpEq:
		return lo <= 0 && hi >= 0
	case OpNe:
		return !(lo == 0 && hi == 0)
	case OpLt:
		return lo < 0
	case OpLe:
		return lo <= 0
	case OpGt:
		return hi > 0
	case OpGe:
		return hi >= 0
	}
	return true
}

func (c Cmp) allMatch(st statsFunc) bool {
	s, _ := st(c.Column)
	if s == nil || s.Nulls != 0 || s.Min == nil || s.Max == nil || c.Value.Kind == KindFloat {
		// (A float column may hold NaN, which its statistics leave out
		// and no comparison holds for.)
		return false
	}
	lo, hi := Compare(*s.Min, c.Value), Compare(*s.Max, c.Value)
	switch c.Op {
	case OpEq:
		return lo == 0 && hi == 0
	case OpNe:
		return lo > 0 || hi < 0
	case OpLt:
		return hi < 0
	case OpLe:
		return hi <= 0
	case OpGt:
		return lo > 0
	case OpGe:
		return lo >= 0
	}
	return false
}

func (c Cmp) match(cols map[string]arrow.Array, i int) bool {
	v, ok := comparable(cols[c.Column], i)
	return ok && cmpHolds(c.Op, Compare(v, c.Value))
}

// comparable is row i's value of col for a comparison: false for a null,
// and for a NaN, which no comparison holds for (as for a null; statistics
// leave NaN out of a column's bounds, so pruning agrees).
func comparable(col arrow.Array, i int) (Value, bool) {
	v, ok := ValueAt(col, i)
	return v, ok && !(v.Kind == KindFloat && math.IsNaN(v.F))
}

func (in InSet) mayMatch(st statsFunc) bool {
	if in.Not {
		return in.notInMayMatch(st)
	}
	for _, v := range in.Values {
		if (Cmp{in.Column, OpEq, v}).mayMatch(st) {
			return true
		}
	}
	return false
}

func (in InSet) allMatch(st statsFunc) bool {
	if len(in.Values) > 0 && in.Values[0].Kind == KindFloat {
		return false // NaN, which the statistics leave out, is in no set
	}
	if in.Not {
		// Every row is out of the set: no null, and no value of the set
		// within the column's range.
		for _, v := range in.Values {
			if (Cmp{in.Column, OpEq, v}).mayMatch(st) {
				return false
			}
		}
		s, _ := st(in.Column)
		return s != nil && s.Nulls == 0
	}
	for _, v := range in.Values {
		if (Cmp{in.Column, OpEq, v}).allMatch(st) {
			return true
		}
	}
	return false
}

func (in InSet) match(cols map[string]arrow.Array, i int) bool {
	v, ok := comparable(cols[in.Column], i)
	if !ok {
		return false
	}
	for _, w := range in.Values {
		if Compare(v, w) == 0 {
			return !in.Not
		}
	}
	return in.Not
}

// notInMayMatch: some row may be out of the set unless every row is null,
// or every value is one value of the set.
func (in InSet) notInMayMatch(st statsFunc) bool {
	s, rows := st(in.Column)
	switch {
	case s == nil:
		return true
	case s.Nulls >= rows:
		return false
	case s.Min == nil || s.Max == nil || Compare(*s.Min, *s.Max) != 0:
		return true
	}
	for _, v := range in.Values {
		if Compare(*s.Min, v) == 0 {
			return false
		}
	}
	return true
}

func (a AndOf) mayMatch(st statsFunc) bool {
	for _, p := range a {
		if !p.mayMatch(st) {
			return false
		}
	}
	return true
}

func (a AndOf) allMatch(st statsFunc) bool {
	for _, p := range a {
		if !p.allMatch(st) {
			return false
		}
	}
	return true
}

func (a AndOf) match(cols map[string]arrow.Array, i int) bool {
	for _, p := range a {
		if !p.match(cols, i) {
			return false
		}
	}
	return true
}
