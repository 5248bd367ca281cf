package command

import (
	"encoding/base64"
	"encoding/csv"
	"fmt"
	"io"
	"iter"
	"strings"
	"text/tabwriter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/internal/jsonrows"
	"github.com/stratadb/strata/table"
)

// columnsFlag reads a --columns flag: nil when empty (every column), a
// usage error when it does not parse.
func columnsFlag(columns string) ([]string, error) {
	if columns == "" {
		return nil, nil
	}
	cols, err := table.ParseColumns(columns)
	if err != nil {
		return nil, usageError{err}
	}
	return cols, nil
}

// rowWriter prints record batches as a table, CSV or JSON lines.
type rowWriter struct {
	format string
	out    io.Writer
	tw     *tabwriter.Writer
	cw     *csv.Writer
	jw     *jsonrows.Writer
	header bool
	rows   int
	limit  int
}

func newRowWriter(out io.Writer, format string, limit int) (*rowWriter, error) {
	w := &rowWriter{format: format, out: out, limit: limit}
	switch format {
	case "table":
		w.tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	case "csv":
		w.cw = csv.NewWriter(out)
	case "jsonl":
		w.jw = jsonrows.New(out)
	default:
		return nil, usageError{fmt.Errorf("--format must be table, csv or jsonl, not %q", format)}
	}
	return w, nil
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
		w.header = true
		names := make([]string, schema.NumFields())
		for i, f := range schema.Fields() {
			names[i] = f.Name
		}
		switch w.format {
		case "table":
			fmt.Fprintln(w.tw, strings.Join(names, "\t"))
		case "csv":
			if err := w.cw.Write(names); err != nil {
				return err
			}
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
		switch w.format {
		case "table", "csv":
			vals := make([]string, rec.NumCols())
			for c := range vals {
				vals[c] = cell(rec.Column(c), i, w.format == "table")
			}
			if w.format == "table" {
				fmt.Fprintln(w.tw, strings.Join(vals, "\t"))
			} else if err := w.cw.Write(vals); err != nil {
				return err
			}
		}
		w.rows++
	}
	return nil
}

// flush writes out what the writer holds (CSV's buffer); a table is
// aligned only at close.
func (w *rowWriter) flush() error {
	if w.format == "csv" {
		w.cw.Flush()
		return w.cw.Error()
	}
	return nil
}

func (w *rowWriter) close() error {
	switch w.format {
	case "table":
		return w.tw.Flush()
	case "csv":
		w.cw.Flush()
		return w.cw.Error()
	}
	return nil
}
