package command

import (
	"encoding/base64"
	"encoding/csv"
	"fmt"
	"io"
	"iter"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/internal/jsonrows"
	"github.com/stratadb/strata/table/expr"
)

// columnsFlag reads a --columns flag: nil when empty (every column), a
// usage error when it does not parse.
func columnsFlag(columns string) ([]string, error) {
	if columns == "" {
		return nil, nil
	}
	cols, err := expr.ParseColumns(columns)
	if err != nil {
		return nil, usageError{err}
	}
	return cols, nil
}

// filterFlag parses a --filter flag; "" is no filter.
func filterFlag(filter string) (expr.Predicate, error) {
	if filter == "" {
		return nil, nil
	}
	p, err := expr.ParseFilter(filter)
	if err != nil {
		return nil, usageError{err}
	}
	return p, nil
}

// rowWriter prints record batches as a table, CSV or JSON lines. A table
// streams: its column widths come from the header and the first
// tableSample rows, which it holds; later rows are padded to them (a
// longer value pushes its line's next columns right).
type rowWriter struct {
	format string
	out    io.Writer
	cw     *csv.Writer
	jw     *jsonrows.Writer
	// names: the columns, for the header; set by the caller when it knows
	// them before any row (so that an empty result prints its header),
	// else from the first batch.
	names  []string
	header bool // printed (or held, for a table)
	rows   int
	limit  int
	sample [][]string // a table's rows before its widths are fixed
	widths []int      // fixed: rows are printed as they come
}

// tableSample is how many rows a table's column widths are taken from.
const tableSample = 200

func newRowWriter(out io.Writer, format string, limit int) (*rowWriter, error) {
	w := &rowWriter{format: format, out: out, limit: limit}
	switch format {
	case "table":
	case "csv":
		w.cw = csv.NewWriter(out)
	case "jsonl":
		w.jw = jsonrows.New(out)
	default:
		return nil, usageError{fmt.Errorf("--format must be table, csv or jsonl, not %q", format)}
	}
	return w, nil
}

// columnsOf names the columns of schema that a projection cols keeps (all
// when cols is nil), for a header printed before any row.
func columnsOf(schema *arrow.Schema, cols []string) []string {
	if cols != nil {
		return cols
	}
	out := make([]string, schema.NumFields())
	for i, f := range schema.Fields() {
		out[i] = f.Name
	}
	return out
}

// full reports whether the limit is reached.
func (w *rowWriter) full() bool { return w.limit > 0 && w.rows >= w.limit }

func cell(arr arrow.Array, i int, short bool) string {
	if arr.IsNull(i) {
		return ""
	}
	switch a := arr.(type) {
	case *array.Binary:
		if short {
			return fmt.Sprintf("<%d bytes>", len(a.Value(i)))
		}
		return base64.StdEncoding.EncodeToString(a.Value(i))
	case *array.String:
		if v := a.Value(i); short && len(v) > 40 {
			return v[:37] + "..."
		}
	}
	return arr.ValueStr(i)
}

// writeAll writes the batches of a scan until it ends or the row limit is
// reached.
func (w *rowWriter) writeAll(scan iter.Seq2[arrow.RecordBatch, error]) error {
	for rec, err := range scan {
		if err != nil {
			return err
		}
		if err := w.write(rec); err != nil {
			return err
		}
		if w.full() {
			return nil
		}
	}
	return nil
}

func (w *rowWriter) write(rec arrow.RecordBatch) error {
	schema := rec.Schema()
	if !w.header {
		w.names = columnsOf(schema, nil)
		if err := w.printHeader(); err != nil {
			return err
		}
	}
	if w.format == "jsonl" {
		// In the schema's order, floats as floats (NaN, ±Infinity too),
		// as the server writes them.
		n := rec.NumRows()
		if w.limit > 0 {
			n = min(n, int64(w.limit-w.rows))
		}
		part := rec.NewSlice(0, n)
		defer part.Release()
		w.rows += int(n)
		return w.jw.Write(part)
	}
	for i := 0; i < int(rec.NumRows()) && !w.full(); i++ {
		vals := make([]string, rec.NumCols())
		for c := range vals {
			vals[c] = cell(rec.Column(c), i, w.format == "table")
		}
		if w.format == "csv" {
			if err := w.cw.Write(vals); err != nil {
				return err
			}
		} else if err := w.tableRow(vals); err != nil {
			return err
		}
		w.rows++
	}
	return nil
}

// printHeader prints (or, for a table, holds) the header of w.names.
func (w *rowWriter) printHeader() error {
	w.header = true
	switch w.format {
	case "table":
		w.sample = append(w.sample, w.names)
	case "csv":
		return w.cw.Write(w.names)
	}
	return nil
}

// tableRow holds a table's row until the widths are fixed, then prints it.
func (w *rowWriter) tableRow(vals []string) error {
	if w.widths == nil {
		w.sample = append(w.sample, vals)
		if len(w.sample) <= tableSample {
			return nil
		}
		return w.fixWidths()
	}
	return w.printTableRow(vals)
}

// fixWidths sets the columns' widths from the rows held and prints them.
func (w *rowWriter) fixWidths() error {
	w.widths = []int{}
	for _, r := range w.sample {
		for c, v := range r {
			if c == len(w.widths) {
				w.widths = append(w.widths, 0)
			}
			w.widths[c] = max(w.widths[c], utf8.RuneCountInString(v))
		}
	}
	for _, r := range w.sample {
		if err := w.printTableRow(r); err != nil {
			return err
		}
	}
	w.sample = nil
	return nil
}

func (w *rowWriter) printTableRow(vals []string) error {
	var b strings.Builder
	for c, v := range vals {
		b.WriteString(v)
		if c < len(vals)-1 {
			width := 0
			if c < len(w.widths) {
				width = w.widths[c]
			}
			b.WriteString(strings.Repeat(" ", max(width-utf8.RuneCountInString(v), 0)+2))
		}
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w.out, b.String())
	return err
}

// flush writes out what the writer holds (CSV's buffer); a table's rows
// held for its widths stay held.
func (w *rowWriter) flush() error {
	if w.format == "csv" {
		w.cw.Flush()
		return w.cw.Error()
	}
	return nil
}

// close prints the header of an empty result (when the names are known)
// and what the writer holds.
func (w *rowWriter) close() error {
	if !w.header && w.names != nil && w.format != "jsonl" {
		if err := w.printHeader(); err != nil {
			return err
		}
	}
	switch w.format {
	case "table":
		if w.widths == nil && len(w.sample) > 0 {
			return w.fixWidths()
		}
	case "csv":
		w.cw.Flush()
		return w.cw.Error()
	}
	return nil
}
