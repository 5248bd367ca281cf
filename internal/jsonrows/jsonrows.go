// Package jsonrows writes record batches as JSON lines, one object a row,
// as the server's scans (format=jsonl) and strata scan --format jsonl
// give them: keys in the schema's order, floats that stay floats (1.0,
// not 1), NaN and ±Infinity as Python and JavaScript's JSON5 readers
// take them (NaN, Infinity, -Infinity), and large string and binary
// values written in pieces, never whole.
package jsonrows

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// streamedValue: a string or binary value longer than this is written in
// pieces of about this size rather than encoded whole: a 100 MB value,
// encoded whole, took its JSON string (133 MB in base64) and the copies
// its buffer made as it grew.
const streamedValue = 64 << 10

// Writer writes record batches as JSON lines: an object a row, its keys
// in the schema's order, each value as Arrow marshals it for JSON (HTML
// characters escaped) except floats (see Float) — holding at most a row's
// small values and a piece of a large one.
type Writer struct {
	w     io.Writer
	line  []byte // the row so far, up to its next large value
	piece bytes.Buffer
	enc   *json.Encoder // encodes a large string's pieces into piece
}

// New is a Writer to w.
func New(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes rec's rows.
func (j *Writer) Write(rec arrow.RecordBatch) error {
	fields := rec.Schema().Fields()
	// The keys in the schema's order; a name given twice is written once,
	// where it first is, with its last column's value.
	cols := make(map[string]int, len(fields))
	names := make([]string, 0, len(fields))
	for i, f := range fields {
		if _, ok := cols[f.Name]; !ok {
			names = append(names, f.Name)
		}
		cols[f.Name] = i
	}
	keys := make([][]byte, len(names))
	for i, name := range names {
		k, err := json.Marshal(name)
		if err != nil {
			return err
		}
		keys[i] = k
	}
	for row := range int(rec.NumRows()) {
		j.line = append(j.line[:0], '{')
		for i, name := range names {
			if i > 0 {
				j.line = append(j.line, ',')
			}
			j.line = append(append(j.line, keys[i]...), ':')
			if err := j.value(rec.Column(cols[name]), row); err != nil {
				return err
			}
		}
		j.line = append(j.line, '}', '\n')
		if _, err := j.w.Write(j.line); err != nil {
			return err
		}
	}
	return nil
}

// value appends row's value of col, or writes the row so far and then the
// value in pieces when it is a large string or binary value.
func (j *Writer) value(col arrow.Array, row int) error {
	if !col.IsNull(row) {
		switch col.(type) {
		case *array.Float64, *array.Float32, *array.Float16, array.ListLike, *array.Struct:
			var err error
			j.line, err = appendValue(j.line, col, row)
			return err
		}
	}
	v := col.GetOneForMarshal(row)
	switch v := v.(type) {
	case string:
		if len(v) > streamedValue {
			return j.longString(v)
		}
	case []byte:
		if len(v) > streamedValue {
			return j.longBytes(v)
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	j.line = append(j.line, b...)
	return nil
}

// Float appends f as a JSON number that reads back as a float — with a
// decimal point or an exponent (1.0, 1e+21) — in the shortest form that
// reads back as the same float of the given bits; NaN and ±Inf as NaN,
// Infinity and -Infinity, which JSON lacks and Python's json module, and
// the ingest of JSON lines, read.
func Float(buf []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(buf, "NaN"...)
	case math.IsInf(f, 1):
		return append(buf, "Infinity"...)
	case math.IsInf(f, -1):
		return append(buf, "-Infinity"...)
	}
	start := len(buf)
	buf = strconv.AppendFloat(buf, f, 'g', -1, bits)
	if !slices.ContainsFunc(buf[start:], func(c byte) bool { return c == '.' || c == 'e' }) {
		buf = append(buf, ".0"...)
	}
	return buf
}

// appendValue appends row's value of col as JSON: floats as Float writes
// them, lists, maps and structs walked so that their floats are too, and
// everything else as Arrow marshals it.
func appendValue(buf []byte, col arrow.Array, row int) ([]byte, error) {
	if col.IsNull(row) {
		return append(buf, "null"...), nil
	}
	switch c := col.(type) {
	case *array.Float64:
		return Float(buf, c.Value(row), 64), nil
	case *array.Float32:
		return Float(buf, float64(c.Value(row)), 32), nil
	case *array.Float16:
		return Float(buf, float64(c.Value(row).Float32()), 32), nil
	case *array.Map:
		// As Arrow writes a map: [{"key": k, "value": v}, ...].
		start, end := c.ValueOffsets(row)
		buf = append(buf, '[')
		for k := start; k < end; k++ {
			if k > start {
				buf = append(buf, ',')
			}
			var err error
			buf = append(buf, `{"key":`...)
			if buf, err = appendValue(buf, c.Keys(), int(k)); err != nil {
				return buf, err
			}
			buf = append(buf, `,"value":`...)
			if buf, err = appendValue(buf, c.Items(), int(k)); err != nil {
				return buf, err
			}
			buf = append(buf, '}')
		}
		return append(buf, ']'), nil
	case array.ListLike:
		start, end := c.ValueOffsets(row)
		values := c.ListValues()
		buf = append(buf, '[')
		for k := start; k < end; k++ {
			if k > start {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = appendValue(buf, values, int(k)); err != nil {
				return buf, err
			}
		}
		return append(buf, ']'), nil
	case *array.Struct:
		st := c.DataType().(*arrow.StructType)
		buf = append(buf, '{')
		for f := range st.NumFields() {
			if f > 0 {
				buf = append(buf, ',')
			}
			k, err := json.Marshal(st.Field(f).Name)
			if err != nil {
				return buf, err
			}
			buf = append(append(buf, k...), ':')
			if buf, err = appendValue(buf, c.Field(f), row); err != nil {
				return buf, err
			}
		}
		return append(buf, '}'), nil
	}
	b, err := json.Marshal(col.GetOneForMarshal(row))
	return append(buf, b...), err
}

// flush writes the row so far.
func (j *Writer) flush() error {
	_, err := j.w.Write(j.line)
	j.line = j.line[:0]
	return err
}

// longString writes s as a JSON string, a piece at a time: each piece is
// encoded as encoding/json encodes a string, and a piece ends where no
// UTF-8 sequence, valid or not, can span the cut — before a byte that
// does not continue one, or after three that do — so that the pieces
// encode to the bytes s encodes to.
func (j *Writer) longString(s string) error {
	j.line = append(j.line, '"')
	if j.enc == nil {
		j.enc = json.NewEncoder(&j.piece) // escapes HTML, as json.Marshal does
	}
	for len(s) > 0 {
		cut := min(len(s), streamedValue)
		for cut < len(s) && !utf8.RuneStart(s[cut]) && !(cut >= 3 && continues(s[cut-3:cut])) {
			cut++
		}
		j.piece.Reset()
		if err := j.enc.Encode(s[:cut]); err != nil {
			return err
		}
		b := j.piece.Bytes() // the piece quoted, and a newline
		j.line = append(j.line, b[1:len(b)-2]...)
		if err := j.flush(); err != nil {
			return err
		}
		s = s[cut:]
	}
	j.line = append(j.line, '"')
	return nil
}

// continues reports whether every byte of s continues a UTF-8 sequence.
func continues(s string) bool {
	for i := range len(s) {
		if utf8.RuneStart(s[i]) {
			return false
		}
	}
	return true
}

// longBytes writes b as JSON writes bytes, a base64 string, encoded as
// it is written.
func (j *Writer) longBytes(b []byte) error {
	j.line = append(j.line, '"')
	if err := j.flush(); err != nil {
		return err
	}
	enc := base64.NewEncoder(base64.StdEncoding, j.w)
	if _, err := enc.Write(b); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	j.line = append(j.line, '"')
	return nil
}
