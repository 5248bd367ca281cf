package table

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ParseFilter reads a predicate written as comparisons joined by AND:
//
//	reward >= 0.9 AND worker = 'w03'
//	id IN (1, 2, 3) AND step != 0
//
// Operators: = != < <= > >= IN. Literals: integers, decimals, 'strings'
// (taken as written) or "strings" (with Go's backslash escapes), true,
// false. A column name is written as it is when it is letters (of any
// script), digits and '_', not starting with a digit; any other name is
// written between backticks, a backtick in it doubled:
//
//	`a.b` = 1 AND `x y` > 2 AND `it``s` = 'x'
func ParseFilter(s string) (Predicate, error) {
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	var preds []Predicate
	for {
		pr, err := p.comparison()
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrBadPredicate, s, err)
		}
		preds = append(preds, pr)
		if p.done() {
			break
		}
		if t := p.next(); !strings.EqualFold(t.text, "AND") || t.kind != tokWord {
			return nil, fmt.Errorf("%w: %q: want AND, got %q", ErrBadPredicate, s, t.text)
		}
	}
	if len(preds) == 1 {
		return preds[0], nil
	}
	return And(preds...), nil
}

type tokKind int

const (
	tokWord  tokKind = iota
	tokIdent         // a `quoted` column name
	tokNumber
	tokString
	tokOp
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
		case c == '(' || c == ')' || c == ',':
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
			out = append(out, token{tokOp, op})
			i = j
		case c == '-' || c == '.' || unicode.IsDigit(c):
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
	toks []token
	pos  int
}

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
	col := p.next()
	if col.kind != tokWord && col.kind != tokIdent {
		return nil, fmt.Errorf("want a column name, got %q", col.text)
	}
	if col.text == "" {
		return nil, fmt.Errorf("want a column name, got ``")
	}
	op := p.next()
	if op.kind == tokWord && strings.EqualFold(op.text, "IN") {
		if t := p.next(); t.text != "(" {
			return nil, fmt.Errorf("want ( after IN, got %q", t.text)
		}
		var vals []Value
		for {
			v, err := p.literal()
			if err != nil {
				return nil, err
			}
			vals = append(vals, v)
			t := p.next()
			if t.text == ")" {
				break
			}
			if t.text != "," {
				return nil, fmt.Errorf("want , or ) in IN list, got %q", t.text)
			}
		}
		return In(col.text, vals...), nil
	}
	if op.kind != tokOp {
		return nil, fmt.Errorf("want an operator after %s, got %q", QuoteColumn(col.text), op.text)
	}
	v, err := p.literal()
	if err != nil {
		return nil, err
	}
	return Cmp{Column: col.text, Op: Op(op.text), Value: v}, nil
}

func (p *parser) literal() (Value, error) {
	t := p.next()
	switch t.kind {
	case tokString:
		return String(t.text), nil
	case tokNumber:
		if i, err := strconv.ParseInt(t.text, 10, 64); err == nil {
			return Int(i), nil
		}
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return Value{}, fmt.Errorf("bad number %q", t.text)
		}
		return Float(f), nil
	case tokWord:
		switch strings.ToLower(t.text) {
		case "true":
			return Bool(true), nil
		case "false":
			return Bool(false), nil
		}
	}
	return Value{}, fmt.Errorf("want a literal, got %q", t.text)
}

// QuoteColumn writes a column name as a filter reads it: as it is when it
// is a plain word (letters, digits and '_', not starting with a digit),
// else between backticks with any backtick doubled.
func QuoteColumn(name string) string {
	plain := name != ""
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
