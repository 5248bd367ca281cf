package expr

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// OrOf is true when any of its predicates is.
type OrOf []Predicate

// NotOf is true when P is false. Bind rewrites it away (negate), so that
// a null, for which P is unknown, makes it unknown too.
type NotOf struct{ P Predicate }

// IsNull is true when the column is null (Not: when it is not).
type IsNull struct {
	Column string
	Not    bool
}

// Like is true when a string column matches Pattern: '%' stands for any
// run of characters, '_' for one, and a backslash makes the character
// after it plain (Not: when it does not match).
type Like struct {
	Column, Pattern string
	Not             bool
	re              *regexp.Regexp
}

func Or(ps ...Predicate) Predicate                     { return OrOf(ps) }
func Not(p Predicate) Predicate                        { return NotOf{p} }
func Null(col string) Predicate                        { return IsNull{Column: col} }
func NotNull(col string) Predicate                     { return IsNull{Column: col, Not: true} }
func LikePattern(col, pat string) Predicate            { return Like{Column: col, Pattern: pat} }
func Between(col string, lo, hi value.Value) Predicate { return And(Ge(col, lo), Le(col, hi)) }

func (o OrOf) Columns() []string {
	var out []string
	for _, p := range o {
		for _, c := range p.Columns() {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}
func (n NotOf) Columns() []string  { return n.P.Columns() }
func (n IsNull) Columns() []string { return []string{n.Column} }
func (l Like) Columns() []string   { return []string{l.Column} }

// An OR prints between parentheses, so that it reads back the same
// inside an AND.
func (o OrOf) String() string {
	parts := make([]string, len(o))
	for i, p := range o {
		parts[i] = p.String()
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}
func (n NotOf) String() string { return "NOT (" + n.P.String() + ")" }
func (n IsNull) String() string {
	if n.Not {
		return QuoteColumn(n.Column) + " IS NOT NULL"
	}
	return QuoteColumn(n.Column) + " IS NULL"
}
func (l Like) String() string {
	not := ""
	if l.Not {
		not = "NOT "
	}
	return fmt.Sprintf("%s %sLIKE %q", QuoteColumn(l.Column), not, l.Pattern)
}

func (o OrOf) bind(s *arrow.Schema) (Predicate, error) {
	out := make(OrOf, len(o))
	for i, p := range o {
		var err error
		if out[i], err = p.bind(s); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (n NotOf) bind(s *arrow.Schema) (Predicate, error) {
	p, err := n.P.bind(s)
	if err != nil {
		return nil, err
	}
	return negate(p), nil
}

func (n IsNull) bind(s *arrow.Schema) (Predicate, error) {
	if len(s.FieldIndices(n.Column)) != 1 {
		return nil, fmt.Errorf("%w: %s", ErrBadPredicate, format.NoColumn(n.Column, s))
	}
	return n, nil
}

func (l Like) bind(s *arrow.Schema) (Predicate, error) {
	idx := s.FieldIndices(l.Column)
	if len(idx) != 1 {
		return nil, fmt.Errorf("%w: %s", ErrBadPredicate, format.NoColumn(l.Column, s))
	}
	if k := value.KindOf(s.Field(idx[0]).Type); k != value.KindString {
		return nil, fmt.Errorf("%w: LIKE matches strings; column %q is %s", ErrBadPredicate, l.Column, s.Field(idx[0]).Type)
	}
	re, err := likeRegexp(l.Pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: LIKE %q: %v", ErrBadPredicate, l.Pattern, err)
	}
	l.re = re
	return l, nil
}

// likeRegexp is the regular expression a LIKE pattern stands for.
func likeRegexp(pat string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString(`(?s)\A`)
	for i := 0; i < len(pat); i++ {
		switch c := pat[i]; c {
		case '%':
			b.WriteString(`.*`)
		case '_':
			b.WriteString(`.`)
		case '\\':
			if i+1 == len(pat) {
				return nil, fmt.Errorf("a backslash ends the pattern")
			}
			i++
			b.WriteString(regexp.QuoteMeta(pat[i : i+1]))
		default:
			b.WriteString(regexp.QuoteMeta(pat[i : i+1]))
		}
	}
	b.WriteString(`\z`)
	return regexp.Compile(b.String())
}

// likePrefix is the plain text a pattern starts with (before its first
// wildcard or escape).
func likePrefix(pat string) string {
	if i := strings.IndexAny(pat, `%_\`); i >= 0 {
		return pat[:i]
	}
	return pat
}

// negated is the comparison true where op is false (a null makes both
// false).
var negated = map[Op]Op{OpEq: OpNe, OpNe: OpEq, OpLt: OpGe, OpGe: OpLt, OpLe: OpGt, OpGt: OpLe}

// negate returns the predicate true exactly where p is false (not where
// it is unknown): NOT pushed down to the comparisons, which are false for
// a null either way.
func negate(p Predicate) Predicate {
	switch q := p.(type) {
	case Cmp:
		q.Op = negated[q.Op]
		return q
	case InSet:
		q.Not = !q.Not
		return q
	case IsNull:
		q.Not = !q.Not
		return q
	case Like:
		q.Not = !q.Not
		return q
	case AndOf:
		out := make(OrOf, len(q))
		for i, x := range q {
			out[i] = negate(x)
		}
		return out
	case OrOf:
		out := make(AndOf, len(q))
		for i, x := range q {
			out[i] = negate(x)
		}
		return out
	case NotOf:
		return q.P
	case ExprCmp:
		q.Op = negated[q.Op]
		return q
	}
	return NotOf{p}
}

func (o OrOf) MayMatch(st StatsFunc) bool {
	for _, p := range o {
		if p.MayMatch(st) {
			return true
		}
	}
	return false
}

func (o OrOf) AllMatch(st StatsFunc) bool {
	for _, p := range o {
		if p.AllMatch(st) {
			return true
		}
	}
	return false
}

func (o OrOf) Match(cols map[string]arrow.Array, i int) bool {
	for _, p := range o {
		if p.Match(cols, i) {
			return true
		}
	}
	return false
}

// NotOf is evaluated as its negation (Bind leaves none; this holds for a
// predicate used unbound).
func (n NotOf) MayMatch(st StatsFunc) bool                    { return negate(n.P).MayMatch(st) }
func (n NotOf) AllMatch(st StatsFunc) bool                    { return negate(n.P).AllMatch(st) }
func (n NotOf) Match(cols map[string]arrow.Array, i int) bool { return negate(n.P).Match(cols, i) }

func (n IsNull) MayMatch(st StatsFunc) bool {
	s, rows := st(n.Column)
	switch {
	case s == nil:
		return true
	case n.Not:
		return s.Nulls < rows
	}
	return s.Nulls > 0
}

func (n IsNull) AllMatch(st StatsFunc) bool {
	s, rows := st(n.Column)
	switch {
	case s == nil:
		return false
	case n.Not:
		return s.Nulls == 0
	}
	return s.Nulls >= rows
}

func (n IsNull) Match(cols map[string]arrow.Array, i int) bool {
	return cols[n.Column].IsNull(i) != n.Not
}

// MayMatch prunes by the pattern's plain prefix: a matching value is at
// least the prefix and below the next string of its length.
func (l Like) MayMatch(st StatsFunc) bool {
	s, rows := st(l.Column)
	if s == nil {
		return true
	}
	if s.Nulls >= rows {
		return false
	}
	prefix := likePrefix(l.Pattern)
	if l.Not || prefix == "" || s.Min == nil || s.Max == nil || s.Max.Kind != value.KindString {
		return true
	}
	if s.Max.S < prefix && !strings.HasPrefix(s.Max.S, prefix) {
		return false
	}
	return s.Min.S <= prefix || strings.HasPrefix(s.Min.S, prefix)
}

func (l Like) AllMatch(StatsFunc) bool { return false }

func (l Like) Match(cols map[string]arrow.Array, i int) bool {
	v, ok := format.ValueAt(cols[l.Column], i)
	if !ok || v.Kind != value.KindString {
		return false
	}
	re := l.re
	if re == nil {
		var err error
		if re, err = likeRegexp(l.Pattern); err != nil {
			return false
		}
	}
	return re.MatchString(v.S) != l.Not
}
