package expr

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/stratadb/strata/table/value"
)

// ParseFilter reads a predicate written as SQL writes a WHERE clause:
//
//	reward >= 0.9 AND worker = 'w03'
//	(step < 10 OR step > 90) AND NOT worker IN ('w01', 'w02')
//	grade IS NULL OR note LIKE 'retry%' OR id BETWEEN 5 AND 9
//
// Comparisons: = (or ==), != (or <>), <, <=, >, >= between values —
// columns, literals, and arithmetic of them (+ - * / %, unary -, see
// Arith); [NOT] IN (list);
// IS [NOT] NULL; [NOT] LIKE 'pattern' ('%' any run, '_' one character,
// '\' makes the next one plain); [NOT] BETWEEN low AND high (both
// included). They combine with NOT, AND and OR (in that order of
// binding) and parentheses. Keywords are any case. Literals: integers,
// decimals, 'strings' (taken as written) or "strings" (with Go's
// backslash escapes), true, false. A comparison with a null is unknown,
// as in SQL, and an unknown row is not selected (NOT of unknown is
// unknown). A column name is written as it is when it is letters (of any
// script), digits and '_', not starting with a digit, and not a keyword,
// or such words joined by dots (target.step, a qualified name); any other
// name is written between backticks, a backtick in it doubled:
//
//	`a.b` = 1 AND `x y` > 2 AND `it``s` = 'x' AND `not` = true
func ParseFilter(s string) (Predicate, error) {
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	pred, err := p.or()
	if err == nil && !p.done() {
		err = fmt.Errorf("want AND, OR or the end, got %q", p.next().text)
	}
	if err != nil {
		shown := s
		if len(shown) > 200 {
			shown = strings.ToValidUTF8(shown[:200], "") + "…"
		}
		return nil, fmt.Errorf("%w: %q: %.300v", ErrBadPredicate, shown, err)
	}
	return pred, nil
}

// keywords cannot be plain column names.
var keywords = []string{"AND", "OR", "NOT", "IN", "IS", "NULL", "LIKE", "BETWEEN", "TRUE", "FALSE"}

func isKeyword(w string) bool {
	return slices.ContainsFunc(keywords, func(k string) bool { return strings.EqualFold(k, w) })
}

// keyword reports whether the next token is the keyword kw, and takes it
// when it is.
func (p *parser) keyword(kw string) bool {
	if p.done() || p.toks[p.pos].kind != tokWord || !strings.EqualFold(p.toks[p.pos].text, kw) {
		return false
	}
	p.pos++
	return true
}

func (p *parser) or() (Predicate, error) {
	var ps OrOf
	for {
		q, err := p.and()
		if err != nil {
			return nil, err
		}
		if o, ok := q.(OrOf); ok {
			ps = append(ps, o...)
		} else {
			ps = append(ps, q)
		}
		if !p.keyword("OR") {
			break
		}
	}
	if len(ps) == 1 {
		return ps[0], nil
	}
	return ps, nil
}

func (p *parser) and() (Predicate, error) {
	var ps AndOf
	for {
		q, err := p.not()
		if err != nil {
			return nil, err
		}
		if a, ok := q.(AndOf); ok {
			ps = append(ps, a...)
		} else {
			ps = append(ps, q)
		}
		if !p.keyword("AND") {
			break
		}
	}
	if len(ps) == 1 {
		return ps[0], nil
	}
	return ps, nil
}

func (p *parser) not() (Predicate, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if p.keyword("NOT") {
		q, err := p.not()
		if err != nil {
			return nil, err
		}
		return Not(q), nil
	}
	if p.at(tokPunct, "(") {
		// A filter between parentheses, or (when that does not parse, or
		// an operator follows it) an arithmetic operand: (a + b) > 3.
		save := p.pos
		p.pos++
		q, err := p.or()
		if err == nil && p.at(tokPunct, ")") {
			p.pos++
			if !p.at(tokOp, "") && !p.at(tokArith, "") {
				return q, nil
			}
		}
		p.pos = save
	}
	return p.comparison()
}

type tokKind int

const (
	tokWord  tokKind = iota
	tokIdent         // a `quoted` column name
	tokNumber
	tokString
	tokOp
	tokArith // + - * / %
	tokPunct
)

type token struct {
	kind tokKind
	text string
}

func lex(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			return nil, fmt.Errorf("%w: byte %#x at %d of %q is not UTF-8", ErrBadPredicate, s[i], i, s)
		case unicode.IsSpace(c):
			i += size
		case c == '`':
			name, j, ok := quotedName(s, i)
			if !ok {
				return nil, fmt.Errorf("%w: unterminated `name` in %q", ErrBadPredicate, s)
			}
			out = append(out, token{tokIdent, name})
			i = j
		case c == '\'':
			j := strings.IndexByte(s[i+1:], s[i])
			if j < 0 {
				return nil, fmt.Errorf("%w: unterminated string in %q", ErrBadPredicate, s)
			}
			out = append(out, token{tokString, s[i+1 : i+1+j]})
			i += j + 2
		case c == '"':
			// Double quotes take Go's escapes (\", \\, \n, \xNN, …), so
			// that any string prints (Predicate.String) as a filter that
			// parses back to it.
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, fmt.Errorf("%w: unterminated string in %q", ErrBadPredicate, s)
			}
			text, err := strconv.Unquote(s[i : j+1])
			if err != nil {
				return nil, fmt.Errorf("%w: string %s: %v", ErrBadPredicate, s[i:j+1], err)
			}
			out = append(out, token{tokString, text})
			i = j + 1
		case c == '(' || c == ')' || c == ',' || c == '[' || c == ']':
			out = append(out, token{tokPunct, string(c)})
			i++
		case strings.ContainsRune("=!<>", c):
			j := i + 1
			if j < len(s) && s[j] == '=' {
				j++
			}
			op := s[i:j]
			if op == "!" {
				return nil, fmt.Errorf("%w: lone '!' in %q", ErrBadPredicate, s)
			}
			if op == "==" {
				op = "="
			}
			if op == "<" && j < len(s) && s[j] == '>' {
				op, j = "!=", j+1 // SQL's <>
			}
			out = append(out, token{tokOp, op})
			i = j
		case strings.ContainsRune("+-*/%", c):
			out = append(out, token{tokArith, string(c)})
			i++
		case c == '.' || unicode.IsDigit(c):
			j := i + 1
			for j < len(s) && (unicode.IsDigit(rune(s[j])) || strings.ContainsRune(".eE+-", rune(s[j]))) {
				if (s[j] == '+' || s[j] == '-') && s[j-1] != 'e' && s[j-1] != 'E' {
					break
				}
				j++
			}
			out = append(out, token{tokNumber, s[i:j]})
			i = j
		case wordRune(c, true):
			j := i + size
			for j < len(s) {
				r, n := utf8.DecodeRuneInString(s[j:])
				if r == '.' && j+1 < len(s) {
					// A qualified name, target.step: one word.
					if next, _ := utf8.DecodeRuneInString(s[j+1:]); wordRune(next, true) {
						j += n
						continue
					}
				}
				if !wordRune(r, false) {
					break
				}
				j += n
			}
			out = append(out, token{tokWord, s[i:j]})
			i = j
		default:
			return nil, fmt.Errorf("%w: unexpected %q in %q", ErrBadPredicate, c, s)
		}
	}
	return out, nil
}

type parser struct {
	toks  []token
	pos   int
	depth int // parentheses, NOTs and minus signs open, and operators of a value
}

// maxDepth bounds a filter's nesting (parentheses, NOT, minus signs) and
// the operators of one value: a deeper one is refused rather than parsed
// (and printed) at a cost that grows with its square.
const maxDepth = 200

// enter opens a level of nesting, failing past maxDepth; leave closes it.
func (p *parser) enter() error {
	if p.depth++; p.depth > maxDepth {
		return fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func (p *parser) done() bool { return p.pos >= len(p.toks) }

func (p *parser) next() token {
	if p.done() {
		return token{kind: tokPunct, text: "end of filter"}
	}
	t := p.toks[p.pos]
	p.pos++
	return t
}

func (p *parser) comparison() (Predicate, error) {
	left, err := p.sum()
	if err != nil {
		return nil, err
	}
	col, isCol := left.(Col)
	if !isCol {
		op := p.next()
		if op.kind != tokOp {
			return nil, fmt.Errorf("want a comparison after %s, got %q", left, op.text)
		}
		right, err := p.sum()
		if err != nil {
			return nil, err
		}
		return comparisonOf(left, Op(op.text), right), nil
	}
	name := string(col)
	if p.keyword("IS") {
		not := p.keyword("NOT")
		if !p.keyword("NULL") {
			return nil, fmt.Errorf("want NULL after IS, got %q", p.next().text)
		}
		return IsNull{Column: name, Not: not}, nil
	}
	not := p.keyword("NOT")
	switch {
	case p.keyword("IN"):
		vals, err := p.list()
		if err != nil {
			return nil, err
		}
		return InSet{Column: name, Values: vals, Not: not}, nil
	case p.keyword("LIKE"):
		t := p.next()
		if t.kind != tokString {
			return nil, fmt.Errorf("want a 'pattern' after LIKE, got %q", t.text)
		}
		if _, err := likeRegexp(t.text); err != nil {
			return nil, fmt.Errorf("LIKE %q: %v", t.text, err)
		}
		return Like{Column: name, Pattern: t.text, Not: not}, nil
	case p.keyword("BETWEEN"):
		lo, err := p.literal()
		if err != nil {
			return nil, err
		}
		if !p.keyword("AND") {
			return nil, fmt.Errorf("want AND in BETWEEN, got %q", p.next().text)
		}
		hi, err := p.literal()
		if err != nil {
			return nil, err
		}
		if not {
			return Not(Between(name, lo, hi)), nil
		}
		return Between(name, lo, hi), nil
	case not:
		return nil, fmt.Errorf("want IN, LIKE or BETWEEN after NOT, got %q", p.next().text)
	}
	op := p.next()
	if op.kind != tokOp {
		return nil, fmt.Errorf("want an operator after %s, got %q", QuoteColumn(name), op.text)
	}
	if p.keyword("NULL") {
		return nil, fmt.Errorf("a comparison with NULL is never true; write %s IS NULL or IS NOT NULL", QuoteColumn(name))
	}
	right, err := p.sum()
	if err != nil {
		return nil, err
	}
	return comparisonOf(left, Op(op.text), right), nil
}

// at tells whether the next token is of kind (and text, when not "").
func (p *parser) at(kind tokKind, text string) bool {
	return !p.done() && p.toks[p.pos].kind == kind && (text == "" || p.toks[p.pos].text == text)
}

// sum reads terms joined by + and -.
func (p *parser) sum() (Expr, error) {
	e, err := p.product()
	for err == nil && (p.at(tokArith, "+") || p.at(tokArith, "-")) {
		if err = p.enter(); err != nil {
			break
		}
		defer p.leave()
		op := p.next().text[0]
		var r Expr
		if r, err = p.product(); err == nil {
			e = Arith{Op: op, L: e, R: r}
		}
	}
	return e, err
}

// product reads factors joined by *, / and %.
func (p *parser) product() (Expr, error) {
	e, err := p.unary()
	for err == nil && (p.at(tokArith, "*") || p.at(tokArith, "/") || p.at(tokArith, "%")) {
		if err = p.enter(); err != nil {
			break
		}
		defer p.leave()
		op := p.next().text[0]
		var r Expr
		if r, err = p.unary(); err == nil {
			e = Arith{Op: op, L: e, R: r}
		}
	}
	return e, err
}

// unary reads a factor, a minus sign before it taken as a negative
// literal's where a number follows.
func (p *parser) unary() (Expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if p.at(tokArith, "-") {
		if p.pos+1 < len(p.toks) && p.toks[p.pos+1].kind == tokNumber {
			v, err := p.literal()
			return Lit{v}, err
		}
		p.pos++
		x, err := p.unary()
		return Neg{x}, err
	}
	switch {
	case p.at(tokPunct, "("):
		p.pos++
		e, err := p.sum()
		if err != nil {
			return nil, err
		}
		if !p.at(tokPunct, ")") {
			return nil, fmt.Errorf("want ), got %q", p.next().text)
		}
		p.pos++
		return e, nil
	case p.at(tokIdent, ""):
		t := p.next()
		if t.text == "" {
			return nil, fmt.Errorf("want a column name, got ``")
		}
		return Col(t.text), nil
	case p.at(tokWord, "") && !isKeyword(p.toks[p.pos].text):
		return Col(p.next().text), nil
	}
	v, err := p.literal()
	if err != nil {
		return nil, err
	}
	return Lit{v}, nil
}

// list reads an IN list: ( literal, ... ).
func (p *parser) list() ([]value.Value, error) {
	if t := p.next(); t.text != "(" {
		return nil, fmt.Errorf("want ( after IN, got %q", t.text)
	}
	var vals []value.Value
	for {
		v, err := p.literal()
		if err != nil {
			return nil, err
		}
		vals = append(vals, v)
		t := p.next()
		if t.text == ")" {
			return vals, nil
		}
		if t.text != "," {
			return nil, fmt.Errorf("want , or ) in IN list, got %q", t.text)
		}
	}
}

func (p *parser) literal() (value.Value, error) {
	t := p.next()
	if t.kind == tokArith && t.text == "-" && p.at(tokNumber, "") {
		t = p.next()
		t.text = "-" + t.text
	}
	switch t.kind {
	case tokString:
		return value.String(t.text), nil
	case tokNumber:
		if i, err := strconv.ParseInt(t.text, 10, 64); err == nil {
			return value.Int(i), nil
		}
		// An integer past int64, up to uint64's largest, stays exact: it
		// compares with a uint64 column's values as the integer it is.
		if u, err := strconv.ParseUint(t.text, 10, 64); err == nil {
			return value.Uint(u), nil
		}
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return value.Value{}, fmt.Errorf("bad number %q", t.text)
		}
		return value.Float(f), nil
	case tokWord:
		switch strings.ToLower(t.text) {
		case "true":
			return value.Bool(true), nil
		case "false":
			return value.Bool(false), nil
		}
	}
	return value.Value{}, fmt.Errorf("want a literal, got %q", t.text)
}

// QuoteColumn writes a column name as a filter reads it: as it is when it
// is a plain word (letters, digits and '_', not starting with a digit)
// and not a keyword, else between backticks with any backtick doubled.
func QuoteColumn(name string) string {
	plain := name != "" && !isKeyword(name)
	for i, r := range name {
		plain = plain && wordRune(r, i == 0)
	}
	if plain {
		return name
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// wordRune tells whether r may be in a plain word (a column name written
// as it is, or a keyword): letters, '_', and digits but not first.
func wordRune(r rune, first bool) bool {
	return r == '_' || unicode.IsLetter(r) || !first && unicode.IsDigit(r)
}

// ParseColumns reads a list of column names separated by commas (as
// --columns and columns= take them), each written as a filter writes it:
// as it is, spaces around it dropped, or between backticks with any
// backtick doubled (`a,b`, `x y`).
func ParseColumns(s string) ([]string, error) {
	var out []string
	for i := 0; ; {
		for i < len(s) && s[i] == ' ' {
			i++
		}
		var name string
		if i < len(s) && s[i] == '`' {
			var ok bool
			if name, i, ok = quotedName(s, i); !ok {
				return nil, fmt.Errorf("%w: unterminated `name` in %q", ErrBadColumns, s)
			}
			for i < len(s) && s[i] == ' ' {
				i++
			}
			if i < len(s) && s[i] != ',' {
				return nil, fmt.Errorf("%w: want , after `%s` in %q", ErrBadColumns, name, s)
			}
		} else {
			j := strings.IndexByte(s[i:], ',')
			if j < 0 {
				j = len(s) - i
			}
			name, i = strings.TrimSpace(s[i:i+j]), i+j
		}
		if name == "" {
			return nil, fmt.Errorf("%w: an empty column name in %q", ErrBadColumns, s)
		}
		out = append(out, name)
		if i >= len(s) {
			return out, nil
		}
		i++ // the comma
	}
}

// quotedName reads the `name` that starts at s[i] (a backtick), a doubled
// backtick standing for one, and returns it with the offset after it; ok
// is false when the closing backtick is missing.
func quotedName(s string, i int) (name string, next int, ok bool) {
	var b strings.Builder
	j := i + 1
	for {
		k := strings.IndexByte(s[j:], '`')
		if k < 0 {
			return "", 0, false
		}
		b.WriteString(s[j : j+k])
		j += k + 1
		if j < len(s) && s[j] == '`' { // a doubled backtick
			b.WriteByte('`')
			j++
			continue
		}
		return b.String(), j, true
	}
}
