package ingest

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"math/rand/v2"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/goccy/go-json"

	"github.com/stratadb/strata/table/evolve"
)

// JSONLines decodes JSON lines, one object per row, into batches of want,
// ChunkRows rows at a time. Keys are matched to columns by name: a key the
// table lacks is an error (unless IgnoreUnknown), a key given twice is an
// error, a missing key is a null (an error in a non-nullable column, as
// is an explicit null), and a value must fit its column's type (arrow-go's
// JSON decoding per type: no fraction in an integer, no overflow). A line
// whose text is not Unicode is an error (see InvalidText): decoded, it
// would not be the row that was sent. Blank
// lines are skipped; an error names the line a row is on, counted from 1
// with blank lines.
// Decoding stops at the first error, which it yields.
func JSONLines(r io.Reader, want *arrow.Schema, o Options) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		o = o.withDefaults()
		d := &jsonDecoder{want: want, o: o, mem: newBudget(o.MaxDecoded), lr: &limited{r: r, left: o.Limit}}
		d.sc = bufio.NewScanner(d.lr)
		d.sc.Buffer(make([]byte, 0, 64<<10), int(min(o.Limit, 1<<30))+1)
		d.index = make(map[string]int, want.NumFields())
		for i, f := range want.Fields() {
			d.index[f.Name] = i
		}
		for former, i := range evolve.FormerNames(want) {
			d.index[former] = i
		}
		d.seen = make([]bool, want.NumFields())
		d.b = array.NewRecordBuilder(d.mem, want)
		defer d.b.Release()
		chunks(d.chunk, yield)
	}
}

// ReadJSONLines decodes all of r (see JSONLines): every batch, or an
// error and none.
func ReadJSONLines(r io.Reader, want *arrow.Schema, o Options) ([]arrow.RecordBatch, error) {
	return collect(JSONLines(r, want, o))
}

type jsonDecoder struct {
	want  *arrow.Schema
	o     Options
	mem   *budget
	lr    *limited
	sc    *bufio.Scanner
	index map[string]int
	seen  []bool
	b     *array.RecordBuilder
	row   int64   // rows decoded so far
	base  int64   // row number of the chunk's first row
	line  int64   // lines read so far, blank ones too
	lines []int64 // the line of each row of the chunk
}

// chunk decodes the next ChunkRows rows and conforms them; nil at the end.
func (d *jsonDecoder) chunk() (rec arrow.RecordBatch, err error) {
	defer func() {
		if p := recover(); p != nil {
			rec = nil
			if d.mem.over.Load() {
				err = tooLarge("decoding JSON lines needs more than %d bytes", d.mem.limit)
			} else {
				err = &evolve.InputError{Row: d.row, Reason: fmt.Sprintf("JSON lines do not decode: %v", p)}
			}
			err = atLine(err, "JSON", d.base, d.lines)
		}
	}()
	n := 0
	d.lines = d.lines[:0]
	for n < d.o.ChunkRows && d.sc.Scan() {
		d.line++
		line := bytes.TrimSpace(d.sc.Bytes())
		if len(line) == 0 {
			continue
		}
		d.lines = append(d.lines, d.line)
		if err := decodeLine(line, d.b, d.index, d.seen, d.o.IgnoreUnknown, d.row, d.want); err != nil {
			if d.lr.over { // the line was cut at the limit
				return nil, tooLarge("JSON lines over %d bytes", d.o.Limit)
			}
			return nil, atLine(err, "JSON", d.base, d.lines)
		}
		d.row++
		n++
	}
	if err := d.sc.Err(); err != nil {
		if d.lr.over || errors.Is(err, bufio.ErrTooLong) {
			return nil, tooLarge("JSON lines over %d bytes", d.o.Limit)
		}
		return nil, fmt.Errorf("ingest: reading JSON lines: %w", err)
	}
	if d.lr.over {
		return nil, tooLarge("JSON lines over %d bytes", d.o.Limit)
	}
	if n == 0 {
		return nil, nil
	}
	raw := d.b.NewRecordBatch()
	defer raw.Release()
	out, err := evolve.Conform(d.want, raw, evolve.ConformOptions{IgnoreUnknown: d.o.IgnoreUnknown, RowBase: d.base})
	err = atLine(err, "JSON", d.base, d.lines)
	if l := d.o.Lines; l != nil && err == nil {
		l.Format, l.Of = "JSON", append(l.Of, d.lines...)
	}
	d.base = d.row
	return out, err
}

func decodeLine(line []byte, b *array.RecordBuilder, index map[string]int, seen []bool, ignore bool, row int64, schema *arrow.Schema) error {
	bad := func(col, reason string) error {
		return &evolve.InputError{Row: row, Column: col, Reason: reason}
	}
	if at, why := InvalidText(line); why != "" {
		return bad("", fmt.Sprintf("%s at byte %d of the line", why, at))
	}
	o := decodeOpts{ignore: ignore}
	line, o.nonFinite = rewriteNonFinite(line)
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return bad("", "not a JSON object")
	}
	clear(seen)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad("", "not a JSON object: "+jsonSyntax(err))
		}
		key, _ := tok.(string)
		i, ok := index[key]
		if !ok {
			if !ignore {
				return bad(key, "the table has no such column")
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return bad(key, "the value is not JSON: "+jsonSyntax(err))
			}
			continue
		}
		if seen[i] {
			return bad(key, "the key appears twice")
		}
		seen[i] = true
		if err := decodeValue(dec, b.Field(i), schema.Field(i), key, o); err != nil {
			var ie *evolve.InputError
			if errors.As(err, &ie) {
				ie.Row = row
				return ie
			}
			return &evolve.InputError{Row: row, Column: key, Reason: refusedJSON(err, schema.Field(i).Type)}
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return bad("", "not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("", "more than one JSON value on the line")
	}
	for i, ok := range seen {
		if !ok {
			b.Field(i).AppendNull()
		}
	}
	return nil
}

// InvalidText finds in JSON text what a decoder would silently turn into
// U+FFFD: bytes that are not UTF-8, and a \u escape of half a surrogate
// pair without its other half. It returns the byte offset and what is
// wrong, or "" when the text is clean. (Outside strings a backslash is a
// syntax error the decoder reports, so escapes are looked for everywhere.)
func InvalidText(line []byte) (int, string) {
	if !utf8.Valid(line) {
		for i := 0; i < len(line); {
			r, n := utf8.DecodeRune(line[i:])
			if r == utf8.RuneError && n <= 1 {
				return i, "text is not UTF-8"
			}
			i += n
		}
	}
	for i := bytes.IndexByte(line, '\\'); i >= 0 && i+1 < len(line); {
		n := 2 // the escape's backslash and its letter
		if r, ok := uEscape(line, i); ok && utf16.IsSurrogate(r) {
			lo, ok := uEscape(line, i+6)
			if !ok || utf16.DecodeRune(r, lo) == utf8.RuneError {
				return i, "\\u escape of half a surrogate pair without its other half"
			}
			n = 12 // both halves
		}
		j := bytes.IndexByte(line[i+n:], '\\')
		if j < 0 {
			break
		}
		i += n + j
	}
	return 0, ""
}

// uEscape reads the \uXXXX escape at line[i:], if that is one.
func uEscape(line []byte, i int) (rune, bool) {
	var b [2]byte
	if i+6 > len(line) || line[i] != '\\' || line[i+1] != 'u' {
		return 0, false
	}
	if _, err := hex.Decode(b[:], line[i+2:i+6]); err != nil {
		return 0, false
	}
	return rune(b[0])<<8 | rune(b[1]), true
}

// chunks yields the batches chunk makes until it returns nil, or its
// first error; each batch is released once the loop body returns.
func chunks(chunk func() (arrow.RecordBatch, error), yield func(arrow.RecordBatch, error) bool) {
	for {
		rec, err := chunk()
		if err != nil {
			yield(nil, err)
			return
		}
		if rec == nil {
			return
		}
		ok := yield(rec, nil)
		rec.Release()
		if !ok {
			return
		}
	}
}

// collect gathers a decoder's batches: all of them, or an error and none.
func collect(seq iter.Seq2[arrow.RecordBatch, error]) ([]arrow.RecordBatch, error) {
	var out []arrow.RecordBatch
	for rec, err := range seq {
		if err != nil {
			release(out)
			return nil, err
		}
		rec.Retain()
		out = append(out, rec)
	}
	return out, nil
}

// decodeValue appends one JSON value to b, a builder of field f at path.
// Nested values are decoded here, strictly: a key a struct lacks is an
// error (unless ignore), a key given twice is an error, a missing key is a
// null (which evolve.Conform refuses where the field is not nullable).
// Scalars are arrow-go's own JSON decoding. A map is an array of {"key",
// "value"} objects, or a JSON object when its keys are strings.
func decodeValue(dec *json.Decoder, b array.Builder, f arrow.Field, path string, o decodeOpts) error {
	bad := func(reason string) error {
		return &evolve.InputError{Column: path, Want: f.Type.String(), Reason: reason}
	}
	switch bb := b.(type) {
	case *array.StructBuilder:
		return decodeStruct(dec, bb, f, path, o, bad)
	case *array.MapBuilder:
		return decodeMap(dec, bb, f, path, o, bad)
	case array.ListLikeBuilder:
		if null, err := opening(dec, bb, '[', bad); null || err != nil {
			return err
		}
		bb.Append(true)
		elem := f.Type.(arrow.ListLikeType).ElemField()
		for dec.More() {
			if err := decodeValue(dec, bb.ValueBuilder(), elem, path+"[]", o); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ']'
		return err
	}
	if o.nonFinite {
		err := decodeNonFinite(dec, b, bad)
		if ie, ok := err.(*evolve.InputError); ok && ie.Column == "" {
			ie.Column = path
		}
		return err
	}
	if err := b.UnmarshalOne(dec); err != nil {
		return &evolve.InputError{Column: path, Reason: refusedJSON(err, f.Type)}
	}
	return nil
}

// decodeOpts shape the decoding of a line's values: ignore drops keys the
// table lacks; nonFinite: the line held NaN, Infinity or -Infinity
// (rewriteNonFinite).
type decodeOpts struct {
	ignore, nonFinite bool
}

// A bare NaN, Infinity or -Infinity, as rewriteNonFinite leaves it: a
// string that starts with a NUL and a random word of this process, so
// that no string of the input can pass for one.
var nonFiniteMark = fmt.Sprintf("\x00nonfinite-%016x:", rand.Uint64())

// nonFiniteJSON is nonFiniteMark as JSON text writes it.
var nonFiniteJSON = `\u0000` + nonFiniteMark[1:]

// rewriteNonFinite turns the bare words NaN, Infinity and -Infinity
// outside strings — not JSON, but what Python's json module writes for
// float("nan") and ±float("inf") — into marked strings (nonFiniteMark)
// that decodeNonFinite gives float columns as NaN and ±Inf and refuses
// elsewhere. It tells whether it found any.
func rewriteNonFinite(line []byte) ([]byte, bool) {
	if !bytes.Contains(line, []byte("NaN")) && !bytes.Contains(line, []byte("Infinity")) {
		return line, false
	}
	var out []byte
	copied, inString := 0, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		if c == '"' {
			inString = true
			continue
		}
		for _, word := range []string{"NaN", "Infinity", "-Infinity"} {
			end := i + len(word)
			if !bytes.HasPrefix(line[i:], []byte(word)) || end < len(line) && bytes.IndexByte([]byte(" \t\r,]}"), line[end]) < 0 {
				continue
			}
			out = append(out, line[copied:i]...)
			out = append(append(append(append(out, '"'), nonFiniteJSON...), word...), '"')
			copied, i = end, end-1
			break
		}
	}
	if out == nil {
		return line, false
	}
	return append(out, line[copied:]...), true
}

// decodeNonFinite decodes a scalar of a line that held a marked NaN or
// ±Infinity (rewriteNonFinite): one of those into a float column, and
// everything else as UnmarshalOne does.
func decodeNonFinite(dec *json.Decoder, b array.Builder, bad func(string) error) error {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return bad("the value is not JSON: " + jsonSyntax(err))
	}
	var word string
	if json.Unmarshal(raw, &word) == nil && strings.HasPrefix(word, nonFiniteMark) {
		f := math.NaN()
		switch word[len(nonFiniteMark):] {
		case "Infinity":
			f = math.Inf(1)
		case "-Infinity":
			f = math.Inf(-1)
		}
		switch fb := b.(type) {
		case *array.Float64Builder:
			fb.Append(f)
		case *array.Float32Builder:
			fb.Append(float32(f))
		case *array.Float16Builder:
			fb.Append(float16.New(float32(f)))
		default:
			return bad(word[len(nonFiniteMark):] + " is a float's value; the column does not hold floats")
		}
		return nil
	}
	vd := json.NewDecoder(bytes.NewReader(raw))
	vd.UseNumber()
	if err := b.UnmarshalOne(vd); err != nil {
		return &evolve.InputError{Reason: refusedJSON(err, b.Type())}
	}
	return nil
}

// decodeStruct decodes a JSON object (or null) into a struct column:
// fields it lacks are null, keys the struct lacks are an error unless
// ignore.
func decodeStruct(dec *json.Decoder, bb *array.StructBuilder, f arrow.Field, path string, o decodeOpts, bad func(string) error) error {
	if null, err := opening(dec, bb, '{', bad); null || err != nil {
		return err
	}
	st := f.Type.(*arrow.StructType)
	bb.Append(true)
	seen := make([]bool, st.NumFields())
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		i, ok := st.FieldIdx(key)
		if !ok {
			if !o.ignore {
				return &evolve.InputError{Column: path + "." + key, Reason: "the struct has no such field"}
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
			continue
		}
		if seen[i] {
			return &evolve.InputError{Column: path + "." + key, Reason: "the key appears twice"}
		}
		seen[i] = true
		if err := decodeValue(dec, bb.FieldBuilder(i), st.Field(i), path+"."+key, o); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return err
	}
	for i, ok := range seen {
		if !ok {
			bb.FieldBuilder(i).AppendNull()
		}
	}
	return nil
}

// decodeMap decodes a map column's value: null, a JSON object (string
// keys) or an array of {"key": …, "value": …} entries.
func decodeMap(dec *json.Decoder, bb *array.MapBuilder, f arrow.Field, path string, o decodeOpts, bad func(string) error) error {
	m := f.Type.(*arrow.MapType)
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case nil:
		bb.AppendNull()
		return nil
	case json.Delim('{'): // {"k": v, …}: string keys
		if m.KeyType().ID() != arrow.STRING && m.KeyType().ID() != arrow.LARGE_STRING {
			return bad("a JSON object gives string keys; give [{\"key\": …, \"value\": …}, …]")
		}
		bb.Append(true)
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := tok.(string)
			if err := bb.KeyBuilder().AppendValueFromString(key); err != nil {
				return err
			}
			if err := decodeValue(dec, bb.ItemBuilder(), m.ItemField(), path+"."+key, o); err != nil {
				return err
			}
		}
		_, err := dec.Token() // '}'
		return err
	case json.Delim('['): // [{"key": k, "value": v}, …]
		bb.Append(true)
		entries := arrow.Field{Name: "entries", Type: arrow.StructOf(m.KeyField(), m.ItemField())}
		for dec.More() {
			if err := decodeEntry(dec, bb, entries, path, o); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ']'
		return err
	}
	return bad(fmt.Sprintf("want an array of entries or an object, got %v", tok))
}

// opening reads the token that opens a nested value: a null (appended to
// b; null is true), or delim; anything else is bad.
func opening(dec *json.Decoder, b array.Builder, delim json.Delim, bad func(string) error) (null bool, err error) {
	tok, err := dec.Token()
	switch {
	case err != nil:
		return false, err
	case tok == nil:
		b.AppendNull()
		return true, nil
	case tok != delim:
		what := map[json.Delim]string{'{': "an object", '[': "an array"}[delim]
		return false, bad(fmt.Sprintf("want %s, got %v", what, tok))
	}
	return false, nil
}

// decodeEntry decodes one {"key": k, "value": v} of a map.
func decodeEntry(dec *json.Decoder, bb *array.MapBuilder, entries arrow.Field, path string, o decodeOpts) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return &evolve.InputError{Column: path, Reason: "a map entry must be an object {\"key\": …, \"value\": …}"}
	}
	st := entries.Type.(*arrow.StructType)
	var haveKey, haveValue bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case "key":
			if haveKey {
				return &evolve.InputError{Column: path + ".key", Reason: "the key appears twice"}
			}
			haveKey = true
			err = decodeValue(dec, bb.KeyBuilder(), st.Field(0), path+".key", o)
		case "value":
			if haveValue {
				return &evolve.InputError{Column: path + ".value", Reason: "the key appears twice"}
			}
			haveValue = true
			err = decodeValue(dec, bb.ItemBuilder(), st.Field(1), path+".value", o)
		default:
			return &evolve.InputError{Column: path, Reason: fmt.Sprintf("a map entry has only \"key\" and \"value\", not %v", tok)}
		}
		if err != nil {
			return err
		}
	}
	if !haveKey {
		return &evolve.InputError{Column: path + ".key", Reason: "a map entry without a key"}
	}
	if !haveValue {
		bb.ItemBuilder().AppendNull()
	}
	_, err = dec.Token() // '}'
	return err
}
