package table

import (
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
)

// Expr is a value computed for each row, in a comparison (ExprCmp): a
// column (Col), a literal (Lit), arithmetic (Arith) or a negation (Neg).
// A null operand, a division by zero or an integer overflow make it null.
type Expr interface {
	String() string
	exprColumns() []string
	// bindExpr checks the expression against a schema and returns the
	// kind of its values.
	bindExpr(s *arrow.Schema) (ValueKind, error)
	eval(cols map[string]arrow.Array, i int) (Value, bool)
}

// Col is a column's value.
type Col string

// Lit is a literal value.
type Lit struct{ V Value }

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

func (c Col) bindExpr(s *arrow.Schema) (ValueKind, error) {
	idx := s.FieldIndices(string(c))
	if len(idx) != 1 {
		return KindNone, fmt.Errorf("%w: %s", ErrBadPredicate, noColumn(string(c), s))
	}
	k := KindOf(s.Field(idx[0]).Type)
	if k == KindNone {
		return k, fmt.Errorf("%w: column %q of type %s cannot be filtered", ErrBadPredicate, string(c), s.Field(idx[0]).Type)
	}
	return k, nil
}

func (l Lit) bindExpr(*arrow.Schema) (ValueKind, error) { return l.V.Kind, nil }

func numeric(k ValueKind) bool { return k == KindInt || k == KindUint || k == KindFloat }

func (a Arith) bindExpr(s *arrow.Schema) (ValueKind, error) {
	lk, err := a.L.bindExpr(s)
	if err != nil {
		return lk, err
	}
	rk, err := a.R.bindExpr(s)
	if err != nil {
		return rk, err
	}
	if !numeric(lk) || !numeric(rk) {
		return KindNone, fmt.Errorf("%w: %s: arithmetic on numbers only", ErrBadPredicate, a)
	}
	if lk == KindFloat || rk == KindFloat {
		if a.Op == '%' {
			return KindNone, fmt.Errorf("%w: %s: %% takes integers", ErrBadPredicate, a)
		}
		return KindFloat, nil
	}
	return KindInt, nil
}

func (n Neg) bindExpr(s *arrow.Schema) (ValueKind, error) {
	k, err := n.X.bindExpr(s)
	if err == nil && !numeric(k) {
		return KindNone, fmt.Errorf("%w: %s: a minus sign before a number only", ErrBadPredicate, n)
	}
	if k == KindUint {
		k = KindInt
	}
	return k, err
}

func (c Col) eval(cols map[string]arrow.Array, i int) (Value, bool) {
	return ValueAt(cols[string(c)], i)
}

func (l Lit) eval(map[string]arrow.Array, int) (Value, bool) { return l.V, true }

// asInt and asFloat read a number of any kind as an integer (false: it
// does not fit) or a float.
func asInt(v Value) (int64, bool) {
	switch v.Kind {
	case KindInt:
		return v.I, true
	case KindUint:
		return int64(v.U), v.U <= math.MaxInt64
	}
	return 0, false
}

func asFloat(v Value) float64 {
	switch v.Kind {
	case KindInt:
		return float64(v.I)
	case KindUint:
		return float64(v.U)
	}
	return v.F
}

func (a Arith) eval(cols map[string]arrow.Array, i int) (Value, bool) {
	l, ok := a.L.eval(cols, i)
	if !ok {
		return Value{}, false
	}
	r, ok := a.R.eval(cols, i)
	if !ok {
		return Value{}, false
	}
	li, lok := asInt(l)
	ri, rok := asInt(r)
	if lok && rok && l.Kind != KindFloat && r.Kind != KindFloat {
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
				return Value{}, false
			}
			out = li / ri
			if a.Op == '%' {
				out = li % ri
			}
		}
		return Int(out), ok
	}
	if l.Kind != KindFloat && r.Kind != KindFloat {
		return Value{}, false // an unsigned integer past int64
	}
	lf, rf := asFloat(l), asFloat(r)
	switch a.Op {
	case '+':
		return Float(lf + rf), true
	case '-':
		return Float(lf - rf), true
	case '*':
		return Float(lf * rf), true
	case '/':
		if rf == 0 {
			return Value{}, false
		}
		return Float(lf / rf), true
	}
	return Value{}, false
}

func (n Neg) eval(cols map[string]arrow.Array, i int) (Value, bool) {
	v, ok := n.X.eval(cols, i)
	if !ok {
		return Value{}, false
	}
	if v.Kind == KindFloat {
		return Float(-v.F), true
	}
	x, ok := asInt(v)
	if !ok || x == math.MinInt64 {
		return Value{}, false
	}
	return Int(-x), true
}

// compareValues orders two values, numbers of any kinds by value; false
// when they cannot be compared.
func compareValues(a, b Value) (int, bool) {
	if a.Kind == b.Kind {
		return Compare(a, b), true
	}
	if numeric(a.Kind) && numeric(b.Kind) {
		// An unsigned value past int64 is above every integer.
		if a.Kind == KindUint && a.U > math.MaxInt64 && b.Kind != KindFloat {
			return 1, true
		}
		if b.Kind == KindUint && b.U > math.MaxInt64 && a.Kind != KindFloat {
			return -1, true
		}
		if ai, ok := asInt(a); ok && a.Kind != KindFloat {
			if bi, ok := asInt(b); ok && b.Kind != KindFloat {
				return Compare(Int(ai), Int(bi)), true
			}
		}
		return Compare(Float(asFloat(a)), Float(asFloat(b))), true
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

func kindName(k ValueKind) string {
	return map[ValueKind]string{KindInt: "an integer", KindUint: "an integer", KindFloat: "a float", KindString: "a string",
		KindBytes: "binary", KindBool: "a boolean"}[k]
}

func (c ExprCmp) mayMatch(statsFunc) bool { return true }
func (c ExprCmp) allMatch(statsFunc) bool { return false }

func (c ExprCmp) match(cols map[string]arrow.Array, i int) bool {
	l, ok := c.L.eval(cols, i)
	if !ok || l.Kind == KindFloat && math.IsNaN(l.F) {
		return false
	}
	r, ok := c.R.eval(cols, i)
	if !ok || r.Kind == KindFloat && math.IsNaN(r.F) {
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
