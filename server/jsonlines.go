package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"slices"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
)

// streamedValue: a string or binary value longer than this is written in
// pieces of about this size rather than encoded whole: a 100 MB value,
// encoded whole, took its JSON string (133 MB in base64) and the copies
// its buffer made as it grew.
const streamedValue = 64 << 10

// jsonLines writes record batches as JSON lines, the bytes
// array.RecordToJSON writes — an object a row, its keys in sorted order,
// each value as Arrow marshals it for JSON, HTML characters escaped —
// holding at most a row's small values and a piece of a large one.
type jsonLines struct {
	w     io.Writer
	line  []byte // the row so far, up to its next large value
	piece bytes.Buffer
	enc   *json.Encoder // encodes a large string's pieces into piece
}

// write writes rec's rows.
func (j *jsonLines) write(rec arrow.RecordBatch) error {
	fields := rec.Schema().Fields()
	// The keys in sorted order, as a JSON object's are; a name given twice
	// is written once, with its last column's value.
	cols := make(map[string]int, len(fields))
	for i, f := range fields {
		cols[f.Name] = i
	}
	names := make([]string, 0, len(cols))
	for name := range cols {
		names = append(names, name)
	}
	slices.Sort(names)
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
			if err := j.value(rec.Column(cols[name]).GetOneForMarshal(row)); err != nil {
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

// value appends v, or writes the row so far and then v in pieces when it
// is a large string or binary value.
func (j *jsonLines) value(v any) error {
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

// flush writes the row so far.
func (j *jsonLines) flush() error {
	_, err := j.w.Write(j.line)
	j.line = j.line[:0]
	return err
}

// longString writes s as a JSON string, a piece at a time: each piece is
// encoded as encoding/json encodes a string, and a piece ends where no
// UTF-8 sequence, valid or not, can span the cut — before a byte that
// does not continue one, or after three that do — so that the pieces
// encode to the bytes s encodes to.
func (j *jsonLines) longString(s string) error {
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
func (j *jsonLines) longBytes(b []byte) error {
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
