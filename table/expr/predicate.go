package expr

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
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
	MayMatch(st StatsFunc) bool
	AllMatch(st StatsFunc) bool
	// match evaluates row i; cols maps column name to array.
	Match(cols map[string]arrow.Array, i int) bool
}

// StatsFunc returns a column's statistics over a set of rows and how many
// rows there are; nil stats mean unknown.
type StatsFunc func(col string) (*format.ColumnStats, int64)

// Cmp compares a column with a value.
type Cmp struct {
	Column string
	Op     Op
	Value  value.Value
}

// InSet is true when the column equals one of Values (Not: when it
// equals none of them; a null is in no set, nor out of one).
type InSet struct {
	Column string
	Values []value.Value
	Not    bool
	// sorted: bound, its Values are in order (value.Compare), so that a
	// row is looked up among thousands of keys (a take's) by a binary
	// search rather than compared with each.
	sorted bool
}

// AndOf is true when every predicate is.
type AndOf []Predicate

func Eq(col string, v value.Value) Predicate     { return Cmp{col, OpEq, v} }
func Ne(col string, v value.Value) Predicate     { return Cmp{col, OpNe, v} }
func Lt(col string, v value.Value) Predicate     { return Cmp{col, OpLt, v} }
func Le(col string, v value.Value) Predicate     { return Cmp{col, OpLe, v} }
func Gt(col string, v value.Value) Predicate     { return Cmp{col, OpGt, v} }
func Ge(col string, v value.Value) Predicate     { return Cmp{col, OpGe, v} }
func In(col string, vs ...value.Value) Predicate { return InSet{Column: col, Values: vs} }
func And(ps ...Predicate) Predicate              { return AndOf(ps) }

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
func coerce(s *arrow.Schema, col string, v value.Value) (value.Value, error) {
	idx := s.FieldIndices(col)
	if len(idx) != 1 {
		return v, fmt.Errorf("%w: %s", ErrBadPredicate, format.NoColumn(col, s))
	}
	want := value.KindOf(s.Field(idx[0]).Type)
	switch {
	case want == value.KindNone:
		return v, fmt.Errorf("%w: column %q of type %s cannot be filtered", ErrBadPredicate, col, s.Field(idx[0]).Type)
	case v.Kind == want:
		return v, nil
	case want == value.KindFloat && v.Kind == value.KindInt:
		return value.Float(float64(v.I)), nil
	case want == value.KindFloat && v.Kind == value.KindUint:
		return value.Float(float64(v.U)), nil
	case want == value.KindInt && v.Kind == value.KindUint:
		return v, fmt.Errorf("%w: column %q (%s) compared with %s, past the largest value it holds", ErrBadPredicate, col, s.Field(idx[0]).Type, v)
	case want == value.KindUint && v.Kind == value.KindInt && v.I >= 0:
		return value.Uint(uint64(v.I)), nil
	case want == value.KindBytes && v.Kind == value.KindString:
		return value.Bytes([]byte(v.S)), nil
	case want == value.KindString && v.Kind == value.KindBytes:
		return value.String(string(v.X)), nil
	}
	return v, fmt.Errorf("%w: column %q (%s) compared with %s", ErrBadPredicate, col, s.Field(idx[0]).Type, v)
}

func (c Cmp) bind(s *arrow.Schema) (Predicate, error) {
	switch c.Op {
	case OpEq, OpNe, OpLt, OpLe, OpGt, OpGe:
	default:
		return nil, fmt.Errorf("%w: unknown operator %q", ErrBadPredicate, c.Op)
	}
	if c.Value.Kind == value.KindUint && c.Value.U > math.MaxInt64 {
		if idx := s.FieldIndices(c.Column); len(idx) == 1 && value.KindOf(s.Field(idx[0]).Type) == value.KindInt {
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
	out := InSet{Column: in.Column, Values: make([]value.Value, len(in.Values)), Not: in.Not}
	for i, v := range in.Values {
		var err error
		if out.Values[i], err = coerce(s, in.Column, v); err != nil {
			return nil, err
		}
	}
	// Coerced, the values are of one kind, which Compare orders wholly.
	slices.SortFunc(out.Values, value.Compare)
	out.sorted = true
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

func (c Cmp) MayMatch(st StatsFunc) bool {
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
	lo, hi := value.Compare(*s.Min, c.Value), value.Compare(*s.Max, c.Value) // sign of min−v, max−v
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

func (c Cmp) AllMatch(st StatsFunc) bool {
	s, _ := st(c.Column)
	if s == nil || s.Nulls != 0 || s.Min == nil || s.Max == nil || c.Value.Kind == value.KindFloat {
		// (A float column may hold NaN, which its statistics leave out
		// and no comparison holds for.)
		return false
	}
	lo, hi := value.Compare(*s.Min, c.Value), value.Compare(*s.Max, c.Value)
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

func (c Cmp) Match(cols map[string]arrow.Array, i int) bool {
	v, ok := comparable(cols[c.Column], i)
	return ok && cmpHolds(c.Op, value.Compare(v, c.Value))
}

// comparable is row i's value of col for a comparison: false for a null,
// and for a NaN, which no comparison holds for (as for a null; statistics
// leave NaN out of a column's bounds, so pruning agrees).
func comparable(col arrow.Array, i int) (value.Value, bool) {
	v, ok := format.ValueAt(col, i)
	return v, ok && !(v.Kind == value.KindFloat && math.IsNaN(v.F))
}

func (in InSet) MayMatch(st StatsFunc) bool {
	if in.Not {
		return in.notInMayMatch(st)
	}
	for _, v := range in.Values {
		if (Cmp{in.Column, OpEq, v}).MayMatch(st) {
			return true
		}
	}
	return false
}

func (in InSet) AllMatch(st StatsFunc) bool {
	if len(in.Values) > 0 && in.Values[0].Kind == value.KindFloat {
		return false // NaN, which the statistics leave out, is in no set
	}
	if in.Not {
		// Every row is out of the set: no null, and no value of the set
		// within the column's range.
		for _, v := range in.Values {
			if (Cmp{in.Column, OpEq, v}).MayMatch(st) {
				return false
			}
		}
		s, _ := st(in.Column)
		return s != nil && s.Nulls == 0
	}
	for _, v := range in.Values {
		if (Cmp{in.Column, OpEq, v}).AllMatch(st) {
			return true
		}
	}
	return false
}

func (in InSet) Match(cols map[string]arrow.Array, i int) bool {
	v, ok := comparable(cols[in.Column], i)
	if !ok {
		return false
	}
	if in.sorted {
		if _, found := slices.BinarySearchFunc(in.Values, v, value.Compare); found {
			return !in.Not
		}
		return in.Not
	}
	for _, w := range in.Values {
		if value.Compare(v, w) == 0 {
			return !in.Not
		}
	}
	return in.Not
}

// notInMayMatch: some row may be out of the set unless every row is null,
// or every value is one value of the set.
func (in InSet) notInMayMatch(st StatsFunc) bool {
	s, rows := st(in.Column)
	switch {
	case s == nil:
		return true
	case s.Nulls >= rows:
		return false
	case s.Min == nil || s.Max == nil || value.Compare(*s.Min, *s.Max) != 0:
		return true
	}
	for _, v := range in.Values {
		if value.Compare(*s.Min, v) == 0 {
			return false
		}
	}
	return true
}

func (a AndOf) MayMatch(st StatsFunc) bool {
	for _, p := range a {
		if !p.MayMatch(st) {
			return false
		}
	}
	return true
}

func (a AndOf) AllMatch(st StatsFunc) bool {
	for _, p := range a {
		if !p.AllMatch(st) {
			return false
		}
	}
	return true
}

func (a AndOf) Match(cols map[string]arrow.Array, i int) bool {
	for _, p := range a {
		if !p.Match(cols, i) {
			return false
		}
	}
	return true
}
