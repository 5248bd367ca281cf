package server

import (
	"archive/zip"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/table/fragment"
)

// NPZ is format=npz's content type: a zip of NumPy .npy arrays, which
// numpy.load reads without pickle.
const NPZ = "application/x-npz"

// The layout of format=npz (docs/api.md): the rows in chunks, each the
// columns of up to scanEncodeBytes of rows, so that the answer streams;
// entry names number the columns, whose names may hold any character.
//
//	columns.npy        the column names, a unicode array
//	types.npy          their types as a schema names them ("int64", "string")
//	K/I.npy            chunk K's values of column I (K, I from 0)
//	K/I.mask.npy       its nulls (bool, true where null), only when it has any
//	K/I.offsets.npy    for a string or binary column: int64 offsets into
//	                   K/I.npy (n+1 of them), which holds the UTF-8 or raw bytes
//	rows.npy           the rows of each chunk (int64), last
//
// Numbers and booleans are written as NumPy holds them (a null as zero),
// timestamps as datetime64 of their unit (UTC), dates as datetime64[D].
type npzEncoder struct {
	zw      *zip.Writer
	schema  *arrow.Schema
	pending []arrow.RecordBatch
	bytes   int64
	chunks  []int64
}

// npzWritable says whether format=npz holds a column of type t: numbers,
// booleans, strings, binary, timestamps and dates (not lists or structs).
func npzWritable(t arrow.DataType) bool {
	_, ok := npyDescr(t)
	return ok || isVarWidth(t)
}

func isVarWidth(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		return true
	}
	return false
}

// npyDescr is the NumPy dtype of a fixed-width column's values.
func npyDescr(t arrow.DataType) (string, bool) {
	switch t.ID() {
	case arrow.BOOL:
		return "|b1", true
	case arrow.INT8:
		return "|i1", true
	case arrow.INT16:
		return "<i2", true
	case arrow.INT32:
		return "<i4", true
	case arrow.INT64:
		return "<i8", true
	case arrow.UINT8:
		return "|u1", true
	case arrow.UINT16:
		return "<u2", true
	case arrow.UINT32:
		return "<u4", true
	case arrow.UINT64:
		return "<u8", true
	case arrow.FLOAT16:
		return "<f2", true
	case arrow.FLOAT32:
		return "<f4", true
	case arrow.FLOAT64:
		return "<f8", true
	case arrow.DATE32:
		return "<M8[D]", true
	case arrow.DATE64:
		return "<M8[ms]", true
	case arrow.TIMESTAMP:
		return "<M8[" + t.(*arrow.TimestampType).Unit.String() + "]", true
	}
	return "", false
}

func newNPZEncoder(w io.Writer, schema *arrow.Schema) (*npzEncoder, error) {
	e := &npzEncoder{zw: zip.NewWriter(w), schema: schema}
	names := make([]string, schema.NumFields())
	types := make([]string, schema.NumFields())
	for i, f := range api.SchemaOf(schema).Fields {
		names[i], types[i] = f.Name, f.Type
	}
	if err := e.unicode("columns.npy", names); err != nil {
		return nil, err
	}
	return e, e.unicode("types.npy", types)
}

// unicode writes strings as a NumPy unicode array: each in UTF-32, padded
// with NULs to the longest.
func (e *npzEncoder) unicode(name string, strs []string) error {
	width := 1
	for _, s := range strs {
		width = max(width, utf8.RuneCountInString(s))
	}
	data := make([]byte, 0, 4*width*len(strs))
	for _, s := range strs {
		n := 0
		for _, r := range s {
			data = binary.LittleEndian.AppendUint32(data, uint32(r))
			n++
		}
		for ; n < width; n++ {
			data = binary.LittleEndian.AppendUint32(data, 0)
		}
	}
	return e.entry(name, fmt.Sprintf("<U%d", width), len(strs), data)
}

func (e *npzEncoder) write(rec arrow.RecordBatch) error {
	if rec.NumRows() == 0 {
		return nil
	}
	rec = fragment.WithTypesOf(e.schema, rec) // retained
	e.pending = append(e.pending, rec)
	for _, c := range rec.Columns() {
		for _, b := range c.Data().Buffers() {
			if b != nil {
				e.bytes += int64(b.Len())
			}
		}
	}
	if e.bytes >= scanEncodeBytes {
		return e.flush(false)
	}
	return nil
}

func (e *npzEncoder) close() error {
	// An answer of no rows has a chunk of none, so that each column's
	// array says its type.
	if err := e.flush(len(e.chunks) == 0); err != nil {
		return err
	}
	data := make([]byte, 0, 8*len(e.chunks))
	for _, n := range e.chunks {
		data = binary.LittleEndian.AppendUint64(data, uint64(n))
	}
	if err := e.entry("rows.npy", "<i8", len(e.chunks), data); err != nil {
		return err
	}
	return e.zw.Close()
}

// flush writes the pending batches as one chunk (with none, only when
// empty is set).
func (e *npzEncoder) flush(empty bool) error {
	if len(e.pending) == 0 && !empty {
		return nil
	}
	defer func() {
		for _, rec := range e.pending {
			rec.Release()
		}
		e.pending, e.bytes = e.pending[:0], 0
	}()
	k := len(e.chunks)
	var n int64
	for _, rec := range e.pending {
		n += rec.NumRows()
	}
	for i, f := range e.schema.Fields() {
		cols := make([]arrow.Array, len(e.pending))
		nulls := 0
		for j, rec := range e.pending {
			cols[j] = rec.Column(i)
			nulls += cols[j].NullN()
		}
		name := fmt.Sprintf("%d/%d", k, i)
		if err := e.column(name, f.Type, cols, int(n)); err != nil {
			return fmt.Errorf("server: format=npz: column %q: %w", f.Name, err)
		}
		if nulls > 0 {
			mask := make([]byte, 0, n)
			for _, c := range cols {
				for r := range c.Len() {
					mask = append(mask, b2u(c.IsNull(r)))
				}
			}
			if err := e.entry(name+".mask.npy", "|b1", int(n), mask); err != nil {
				return err
			}
		}
	}
	e.chunks = append(e.chunks, n)
	return nil
}

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// column writes the values of one column of a chunk (n rows in cols).
func (e *npzEncoder) column(name string, t arrow.DataType, cols []arrow.Array, n int) error {
	if isVarWidth(t) {
		offsets := make([]byte, 0, 8*(n+1))
		var at uint64
		offsets = binary.LittleEndian.AppendUint64(offsets, 0)
		for _, c := range cols {
			vc := c.(interface{ ValueLen(int) int })
			for r := range c.Len() {
				if c.IsValid(r) {
					at += uint64(vc.ValueLen(r))
				}
				offsets = binary.LittleEndian.AppendUint64(offsets, at)
			}
		}
		w, err := e.header(name+".npy", "|u1", int(at))
		if err != nil {
			return err
		}
		for _, c := range cols {
			for r := range c.Len() {
				if c.IsValid(r) {
					if _, err := w.Write(varValue(c, r)); err != nil {
						return err
					}
				}
			}
		}
		return e.entry(name+".offsets.npy", "<i8", n+1, offsets)
	}
	descr, ok := npyDescr(t)
	if !ok {
		return fmt.Errorf("type %s", t)
	}
	w, err := e.header(name+".npy", descr, n)
	if err != nil {
		return err
	}
	for _, c := range cols {
		if _, err := w.Write(fixedValues(c)); err != nil {
			return err
		}
	}
	return nil
}

func varValue(c arrow.Array, r int) []byte {
	switch c := c.(type) {
	case *array.String:
		return []byte(c.Value(r))
	case *array.LargeString:
		return []byte(c.Value(r))
	case *array.Binary:
		return c.Value(r)
	case *array.LargeBinary:
		return c.Value(r)
	}
	return nil
}

// fixedValues is the little-endian bytes of a fixed-width column's
// values, a null as zero.
func fixedValues(c arrow.Array) []byte {
	n := c.Len()
	switch c := c.(type) {
	case *array.Boolean:
		out := make([]byte, n)
		for r := range n {
			out[r] = b2u(c.IsValid(r) && c.Value(r))
		}
		return out
	case *array.Date32:
		out := make([]byte, 0, 8*n)
		for r := range n {
			var d int64
			if c.IsValid(r) {
				d = int64(c.Value(r))
			}
			out = binary.LittleEndian.AppendUint64(out, uint64(d))
		}
		return out
	}
	width := c.DataType().(arrow.FixedWidthDataType).Bytes()
	buf := c.Data().Buffers()[1].Bytes()
	raw := buf[c.Data().Offset()*width : (c.Data().Offset()+n)*width]
	if c.NullN() == 0 {
		return raw
	}
	out := make([]byte, len(raw))
	copy(out, raw)
	for r := range n {
		if c.IsNull(r) {
			clear(out[r*width : (r+1)*width])
		}
	}
	return out
}

// entry writes one whole .npy array of a one-dimensional shape.
func (e *npzEncoder) entry(name, descr string, n int, data []byte) error {
	w, err := e.header(name, descr, n)
	if err == nil {
		_, err = w.Write(data)
	}
	return err
}

// header starts a .npy entry: format 1.0's magic and a header padded so
// that the data starts at a multiple of 64 bytes; the caller writes the
// data.
func (e *npzEncoder) header(name, descr string, n int) (io.Writer, error) {
	w, err := e.zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
	if err != nil {
		return nil, err
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }", descr, n)
	pad := 64 - (10+len(dict)+1)%64
	if pad == 64 {
		pad = 0
	}
	hdr := dict + strings.Repeat(" ", pad) + "\n"
	if len(hdr) > math.MaxUint16 {
		return nil, fmt.Errorf("npy header of %d bytes", len(hdr))
	}
	pre := append([]byte("\x93NUMPY\x01\x00"), 0, 0)
	binary.LittleEndian.PutUint16(pre[8:], uint16(len(hdr)))
	if _, err := w.Write(pre); err != nil {
		return nil, err
	}
	_, err = io.WriteString(w, hdr)
	return w, err
}
