package ingest

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/table/evolve"
)

// CSV decodes CSV with a header line into batches of want, ChunkRows rows
// at a time. Header names are matched to columns by name (any order; an
// unknown name is an error unless IgnoreUnknown; a missing column is
// null). An empty field is a null, so it is an error in a non-nullable
// column. Every row must have as many fields as the header. Nested columns
// cannot come from CSV. An error names the line a row is on (the header is
// line 1).
// Decoding stops at the first error, which it yields.
func CSV(r io.Reader, want *arrow.Schema, o Options) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		o = o.withDefaults()
		d := &csvDecoder{want: want, o: o, mem: newBudget(o.MaxDecoded), lr: &limited{r: r, left: o.Limit}}
		d.cr = csv.NewReader(d.lr)
		d.cr.ReuseRecord = true
		if err := d.header(); err != nil {
			yield(nil, err)
			return
		}
		d.b = array.NewRecordBuilder(d.mem, d.fileSchema)
		defer d.b.Release()
		chunks(d.chunk, yield)
	}
}

// ReadCSV decodes all of r (see CSV): every batch, or an error and none.
func ReadCSV(r io.Reader, want *arrow.Schema, o Options) ([]arrow.RecordBatch, error) {
	return collect(CSV(r, want, o))
}

type csvDecoder struct {
	want       *arrow.Schema
	o          Options
	mem        *budget
	lr         *limited
	cr         *csv.Reader
	fileSchema *arrow.Schema // the file's columns that go in, in its order
	skip       []bool        // the file's columns that are ignored
	b          *array.RecordBuilder
	row, base  int64
	lines      []int64 // the line of each row of the chunk
}

func (d *csvDecoder) header() error {
	header, err := d.cr.Read()
	if err != nil {
		if d.lr.over {
			return tooLarge("CSV over %d bytes", d.o.Limit)
		}
		return &evolve.InputError{Row: -1, Reason: "no CSV header line: " + err.Error()}
	}
	var fields []arrow.Field
	d.skip = make([]bool, len(header))
	seen := map[string]bool{}
	for i, name := range header {
		if seen[name] {
			return &evolve.InputError{Row: -1, Column: name, Reason: "the header names this column twice"}
		}
		seen[name] = true
		idx := d.want.FieldIndices(name)
		if i, ok := evolve.FormerNames(d.want)[name]; ok && len(idx) == 0 {
			idx = []int{i}
		}
		if len(idx) == 0 {
			if !d.o.IgnoreUnknown {
				return &evolve.InputError{Row: -1, Column: name, Reason: "the table has no such column"}
			}
			d.skip[i] = true
			continue
		}
		f := d.want.Field(idx[0])
		if _, nested := f.Type.(arrow.NestedType); nested {
			return &evolve.InputError{Row: -1, Column: name, Want: f.Type.String(),
				Reason: "a nested column cannot come from CSV (use JSON lines, Parquet or Arrow)"}
		}
		f.Nullable = true // nulls are checked against the table's field by Conform
		fields = append(fields, f)
	}
	d.fileSchema = arrow.NewSchema(fields, nil)
	return nil
}

// chunk decodes the next ChunkRows rows and conforms them; nil at the end.
func (d *csvDecoder) chunk() (rec arrow.RecordBatch, err error) {
	defer func() {
		if p := recover(); p != nil {
			rec = nil
			if d.mem.over.Load() {
				err = tooLarge("decoding CSV needs more than %d bytes", d.mem.limit)
			} else {
				err = &evolve.InputError{Row: d.row, Reason: fmt.Sprintf("CSV does not decode: %v", p)}
			}
			err = atLine(err, "CSV", d.base, d.lines)
		}
	}()
	n := 0
	d.lines = d.lines[:0]
	for n < d.o.ChunkRows {
		fields, err := d.cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if d.lr.over {
				return nil, tooLarge("CSV over %d bytes", d.o.Limit)
			}
			ie := &evolve.InputError{Row: d.row, Reason: "not a CSV row: " + err.Error()}
			if pe := (*csv.ParseError)(nil); errors.As(err, &pe) {
				ie.Line, ie.Format, ie.Reason = int64(pe.Line), "CSV", "not a CSV row: "+pe.Err.Error()
			}
			return nil, ie
		}
		line, _ := d.cr.FieldPos(0)
		d.lines = append(d.lines, int64(line))
		if d.lr.over {
			return nil, tooLarge("CSV over %d bytes", d.o.Limit)
		}
		col := 0
		for i, v := range fields {
			if d.skip[i] {
				continue
			}
			fb := d.b.Field(col)
			if v == "" {
				fb.AppendNull()
			} else if err := fb.AppendValueFromString(v); err != nil {
				if d.lr.over {
					return nil, tooLarge("CSV over %d bytes", d.o.Limit)
				}
				f := d.fileSchema.Field(col)
				return nil, atLine(&evolve.InputError{Row: d.row, Column: f.Name, Reason: refusedText(v, f.Type, err)}, "CSV", d.base, d.lines)
			}
			col++
		}
		d.row++
		n++
	}
	if n == 0 {
		if d.row == 0 {
			return nil, checkEmpty(d.want, d.fileSchema, d.o)
		}
		return nil, nil
	}
	raw := d.b.NewRecordBatch()
	defer raw.Release()
	out, err := evolve.Conform(d.want, raw, evolve.ConformOptions{IgnoreUnknown: d.o.IgnoreUnknown, RowBase: d.base})
	err = atLine(err, "CSV", d.base, d.lines)
	if l := d.o.Lines; l != nil && err == nil {
		l.Format, l.Of = "CSV", append(l.Of, d.lines...)
	}
	d.base = d.row
	return out, err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
