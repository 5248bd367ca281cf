package server

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	acsv "github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/internal/jsonrows"
	"github.com/stratadb/strata/table/fragment"
)

// rowEncoder writes a stream of batches in one answer format.
type rowEncoder interface {
	write(rec arrow.RecordBatch) error
	close() error
}

// answerFormat is the format of rows asked for: format=jsonl, arrow or
// csv, or without format= the Accept header's (JSON lines, CSV), Arrow IPC
// otherwise.
func answerFormat(r *http.Request) (string, error) {
	switch f := r.URL.Query().Get("format"); f {
	case "jsonl", "arrow", "csv", "npz":
		return f, nil
	case "":
	default:
		return "", badRequest("format=%q: want jsonl, arrow, csv or npz", f)
	}
	switch accept := r.Header.Get("Accept"); {
	case strings.Contains(accept, NDJSON):
		return "jsonl", nil
	case strings.Contains(accept, api.CSV):
		return "csv", nil
	case strings.Contains(accept, NPZ) && r.Pattern == "GET /api/v1/tables/{name}/rows":
		return "npz", nil // a scan's answer only (as format=npz)
	}
	return "arrow", nil
}

// csvTypes are the types format=csv writes: numbers and booleans as Go
// formats them (NaN, +Inf, -Inf for floats), strings as they are, binary
// as base64, timestamps as "2006-01-02 15:04:05.999999", dates as
// "2006-01-02"; null as an empty field.
func csvWritable(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.BOOL, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64, arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY,
		arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64:
		return true
	}
	return false
}

// newEncoder starts the answer (its status and content type) and returns
// its encoder. A schema format=csv cannot write is refused before.
func newEncoder(w http.ResponseWriter, format string, schema *arrow.Schema) (rowEncoder, error) {
	switch format {
	case "jsonl":
		w.Header().Set("Content-Type", NDJSON)
		w.WriteHeader(http.StatusOK)
		return jsonEncoder{jsonrows.New(w)}, nil
	case "csv":
		for _, f := range schema.Fields() {
			if !csvWritable(f.Type) {
				return nil, badRequest("format=csv: column %q is of type %s, which CSV does not hold; ask for format=arrow or jsonl", f.Name, f.Type)
			}
		}
		w.Header().Set("Content-Type", api.CSV+"; charset=utf-8; header=present")
		w.WriteHeader(http.StatusOK)
		return &csvEncoder{w: w, schema: schema}, nil
	case "npz":
		for _, f := range schema.Fields() {
			if !npzWritable(f.Type) {
				return nil, badRequest("format=npz: column %q is of type %s, which NumPy's arrays do not hold; ask for format=arrow or jsonl, or leave it out with columns=", f.Name, f.Type)
			}
		}
		w.Header().Set("Content-Type", NPZ)
		w.WriteHeader(http.StatusOK)
		return newNPZEncoder(w, schema)
	}
	w.Header().Set("Content-Type", ArrowStream)
	w.WriteHeader(http.StatusOK)
	return ipcEncoder{ipc.NewWriter(w, ipc.WithSchema(schema)), schema}, nil
}

type jsonEncoder struct{ jl *jsonrows.Writer }

func (e jsonEncoder) write(rec arrow.RecordBatch) error { return e.jl.Write(rec) }
func (e jsonEncoder) close() error                      { return nil }

type ipcEncoder struct {
	iw     *ipc.Writer
	schema *arrow.Schema
}

func (e ipcEncoder) write(rec arrow.RecordBatch) error {
	// The batch in the writer's very types (see evolve.TypesEqual).
	out := fragment.WithTypesOf(e.schema, rec)
	defer out.Release()
	return e.iw.Write(out)
}

func (e ipcEncoder) close() error { return e.iw.Close() }

// csvEncoder writes a header line (also for no rows), then the rows.
type csvEncoder struct {
	w      http.ResponseWriter
	schema *arrow.Schema
	cw     *acsv.Writer
}

func (e *csvEncoder) write(rec arrow.RecordBatch) (err error) {
	if e.cw == nil {
		e.cw = acsv.NewWriter(e.w, e.schema, acsv.WithHeader(true), acsv.WithNullWriter(""))
	}
	defer func() {
		if r := recover(); r != nil { // a type the writer does not take (csvWritable)
			err = fmt.Errorf("server: writing CSV: %v", r)
		}
	}()
	out := fragment.WithTypesOf(e.schema, rec)
	defer out.Release()
	return e.cw.Write(out)
}

func (e *csvEncoder) close() error {
	if e.cw != nil {
		e.cw.Flush()
		return e.cw.Error()
	}
	cw := csv.NewWriter(e.w)
	names := make([]string, e.schema.NumFields())
	for i, f := range e.schema.Fields() {
		names[i] = f.Name
	}
	if err := cw.Write(names); err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}
