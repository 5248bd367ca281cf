package expr

import (
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// Expr is a value computed for each row, in a comparison (ExprCmp): a
// column (Col), a literal (Lit), arithmetic (Arith) or a negation (Neg).
// A null operand, a division by zero or an integer overflow make it null.
type Expr interface {
	String() string
	exprColumns() []string
	// bindExpr checks the expression against a schema and returns the
	// kind of its values.
	bindExpr(s *arrow.Schema) (value.Kind, error)
	eval(cols map[string]arrow.Array, i int) (value.Value, bool)
}

// Col is a column's value.
type Col string

// Lit is a literal value.
type Lit struct{ V value.Value }

// Arith is L Op R for Op one of + - * / %: integers (both integer; / and
// % truncate, as Go and SQL do) or floats.
type Arith struct {
	Op   byte
	L, R Expr
}

// Neg is -X.
type Neg struct{ X Expr }

// ExprCmp compares two expressions; a comparison of a column with a literal
// is a Cmp, which statistics can prune by, this one is not.
type ExprCmp struct {
	L  Expr
	Op Op
	R  Expr
}

func (c Col) String() string { return QuoteColumn(string(c)) }
func (l Lit) String() string { return l.V.String() }
func (a Arith) String() string {
	return "(" + a.L.String() + " " + string(a.Op) + " " + a.R.String() + ")"
}
func (n Neg) String() string { return "-(" + n.X.String() + ")" }
func (c ExprCmp) String() string {
	return c.L.String() + " " + string(c.Op) + " " + c.R.String()
}

func (c Col) exprColumns() []string   { return []string{string(c)} }
func (l Lit) exprColumns() []string   { return nil }
func (a Arith) exprColumns() []string { return union(a.L.exprColumns(), a.R.exprColumns()) }
func (n Neg) exprColumns() []string   { return n.X.exprColumns() }
func (c ExprCmp) Columns() []string   { return union(c.L.exprColumns(), c.R.exprColumns()) }

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func (c Col) bindExpr(s *arrow.Schema) (value.Kind, error) {
	idx := s.FieldIndices(string(c))
	if len(idx) != 1 {
		return value.KindNone, fmt.Errorf("%w: %s", ErrBadPredicate, format.NoColumn(string(c), s))
	}
	k := value.KindOf(s.Field(idx[0]).Type)
	if k == value.KindNone {
		return k, fmt.Errorf("%w: column %q of type %s cannot be filtered", ErrBadPredicate, string(c), s.Field(idx[0]).Type)
	}
	return k, nil
}

func (l Lit) bindExpr(*arrow.Schema) (value.Kind, error) { return l.V.Kind, nil }

func numeric(k value.Kind) bool {
	return k == value.KindInt || k == value.KindUint || k == value.KindFloat
}

func (a Arith) bindExpr(s *arrow.Schema) (value.Kind, error) {
	lk, err := a.L.bindExpr(s)
	if err != nil {
		return lk, err
	}
	rk, err := a.R.bindExpr(s)
	if err != nil {
		return rk, err
	}
	if !numeric(lk) || !numeric(rk) {
		return value.KindNone, fmt.Errorf("%w: %s: arithmetic on numbers only", ErrBadPredicate, a)
	}
	if lk == value.KindFloat || rk == value.KindFloat {
		if a.Op == '%' {
			return value.KindNone, fmt.Errorf("%w: %s: %% takes integers", ErrBadPredicate, a)
		}
		return value.KindFloat, nil
	}
	return value.KindInt, nil
}

func (n Neg) bindExpr(s *arrow.Schema) (value.Kind, error) {
	k, err := n.X.bindExpr(s)
	if err == nil && !numeric(k) {
		return value.KindNone, fmt.Errorf("%w: %s: a minus sign before a number only", ErrBadPredicate, n)
	}
	if k == value.KindUint {
		k = value.KindInt
	}
	return k, err
}

func (c Col) eval(cols map[string]arrow.Array, i int) (value.Value, bool) {
	return format.ValueAt(cols[string(c)], i)
}

func (l Lit) eval(map[string]arrow.Array, int) (value.Value, bool) { return l.V, true }

// asInt and asFloat read a number of any kind as an integer (false: it
// does not fit) or a float.
func asInt(v value.Value) (int64, bool) {
	switch v.Kind {
	case value.KindInt:
		return v.I, true
	case value.KindUint:
		return int64(v.U), v.U <= math.MaxInt64
	}
	return 0, false
}

func asFloat(v value.Value) float64 {
	switch v.Kind {
	case value.KindInt:
		return float64(v.I)
	case value.KindUint:
		return float64(v.U)
	}
	return v.F
}

func (a Arith) eval(cols map[string]arrow.Array, i int) (value.Value, bool) {
	l, ok := a.L.eval(cols, i)
	if !ok {
		return value.Value{}, false
	}
	r, ok := a.R.eval(cols, i)
	if !ok {
		return value.Value{}, false
	}
	li, lok := asInt(l)
	ri, rok := asInt(r)
	if lok && rok && l.Kind != value.KindFloat && r.Kind != value.KindFloat {
		var out int64
		switch a.Op {
		case '+':
			out = li + ri
			ok = (out > li) == (ri > 0) || ri == 0
		case '-':
			out = li - ri
			ok = (out < li) == (ri > 0) || ri == 0
		case '*':
			out = li * ri
			ok = li == 0 || (out/li == ri && !(li == -1 && ri == math.MinInt64) && !(ri == -1 && li == math.MinInt64))
		case '/', '%':
			if ri == 0 || li == math.MinInt64 && ri == -1 {
				return value.Value{}, false
			}
			out = li / ri
			if a.Op == '%' {
				out = li % ri
			}
		}
		return value.Int(out), ok
	}
	if l.Kind != value.KindFloat && r.Kind != value.KindFloat {
		return value.Value{}, false // an unsigned integer past int64
	}
	lf, rf := asFloat(l), asFloat(r)
	switch a.Op {
	case '+':
		return value.Float(lf + rf), true
	case '-':
		return value.Float(lf - rf), true
	case '*':
		return value.Float(lf * rf), true
	case '/':
		if rf == 0 {
			return value.Value{}, false
		}
		return value.Float(lf / rf), true
	}
	return value.Value{}, false
}

func (n Neg) eval(cols map[string]arrow.Array, i int) (value.Value, bool) {
	v, ok := n.X.eval(cols, i)
	if !ok {
		return value.Value{}, false
	}
	if v.Kind == value.KindFloat {
		return value.Float(-v.F), true
	}
	x, ok := asInt(v)
	if !ok || x == math.MinInt64 {
		return value.Value{}, false
	}
	return value.Int(-x), true
}

// compareValues orders two values, numbers of any kinds by value; false
// when they cannot be compared.
func compareValues(a, b value.Value) (int, bool) {
	if a.Kind == b.Kind {
		return value.Compare(a, b), true
	}
	if numeric(a.Kind) && numeric(b.Kind) {
		// An unsigned value past int64 is above every integer.
		if a.Kind == value.KindUint && a.U > math.MaxInt64 && b.Kind != value.KindFloat {
			return 1, true
		}
		if b.Kind == value.KindUint && b.U > math.MaxInt64 && a.Kind != value.KindFloat {
			return -1, true
		}
		if ai, ok := asInt(a); ok && a.Kind != value.KindFloat {
			if bi, ok := asInt(b); ok && b.Kind != value.KindFloat {
				return value.Compare(value.Int(ai), value.Int(bi)), true
			}
		}
		return value.Compare(value.Float(asFloat(a)), value.Float(asFloat(b))), true
	}
	return 0, false
}

func (c ExprCmp) bind(s *arrow.Schema) (Predicate, error) {
	if _, ok := map[Op]bool{OpEq: true, OpNe: true, OpLt: true, OpLe: true, OpGt: true, OpGe: true}[c.Op]; !ok {
		return nil, fmt.Errorf("%w: unknown operator %q", ErrBadPredicate, c.Op)
	}
	lk, err := c.L.bindExpr(s)
	if err != nil {
		return nil, err
	}
	rk, err := c.R.bindExpr(s)
	if err != nil {
		return nil, err
	}
	if lk != rk && !(numeric(lk) && numeric(rk)) {
		return nil, fmt.Errorf("%w: %s compares %s with %s", ErrBadPredicate, c, kindName(lk), kindName(rk))
	}
	return c, nil
}

func kindName(k value.Kind) string {
	return map[value.Kind]string{value.KindInt: "an integer", value.KindUint: "an integer", value.KindFloat: "a float", value.KindString: "a string",
		value.KindBytes: "binary", value.KindBool: "a boolean"}[k]
}

func (c ExprCmp) MayMatch(StatsFunc) bool { return true }
func (c ExprCmp) AllMatch(StatsFunc) bool { return false }

func (c ExprCmp) Match(cols map[string]arrow.Array, i int) bool {
	l, ok := c.L.eval(cols, i)
	if !ok || l.Kind == value.KindFloat && math.IsNaN(l.F) {
		return false
	}
	r, ok := c.R.eval(cols, i)
	if !ok || r.Kind == value.KindFloat && math.IsNaN(r.F) {
		return false
	}
	n, ok := compareValues(l, r)
	return ok && cmpHolds(c.Op, n)
}

// comparisonOf makes the predicate l op r: a Cmp when one side is a column
// and the other a literal (which statistics prune by), else an ExprCmp.
func comparisonOf(l Expr, op Op, r Expr) Predicate {
	flip := map[Op]Op{OpEq: OpEq, OpNe: OpNe, OpLt: OpGt, OpLe: OpGe, OpGt: OpLt, OpGe: OpLe}
	if c, ok := l.(Col); ok {
		if v, ok := r.(Lit); ok {
			return Cmp{Column: string(c), Op: op, Value: v.V}
		}
	}
	if v, ok := l.(Lit); ok {
		if c, ok := r.(Col); ok {
			return Cmp{Column: string(c), Op: flip[op], Value: v.V}
		}
	}
	return ExprCmp{L: l, Op: op, R: r}
}
