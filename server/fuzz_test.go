package server_test

import (
	"bytes"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/server"
)

// The append paths through the real handler, fuzzed. Whatever the body:
// the answer is 200 and a fresh read gives back exactly the rows the body
// holds (as an independent decode of it reads them), or it is a 4xx and
// the table holds nothing; never a 5xx, never a crash.

var fuzzSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "msg", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	{Name: "meta", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32}), Nullable: true},
}, nil)

type appendFuzzer struct {
	f *fixture
	n atomic.Int64
}

func newAppendFuzzer(f *testing.F) *appendFuzzer {
	return &appendFuzzer{f: start(f, "mem://", server.Options{MaxBodyBytes: 1 << 20})}
}

func (a *appendFuzzer) check(t *testing.T, ctype string, body []byte, decode func() ([]arrow.RecordBatch, error)) {
	name := fmt.Sprintf("t%d", a.n.Add(1))
	if _, err := a.f.c.CreateTable(ctx, name, fuzzSchema); err != nil {
		t.Fatal(err)
	}
	code, msg := post(t, a.f, "/api/v1/tables/"+name+"/rows", ctype, body)
	got, err := a.f.c.Scan(ctx, name, client.ScanOptions{Fresh: true})
	if err != nil {
		t.Fatalf("fresh read after a %d: %v", code, err)
	}
	defer ingest.Release(got)
	switch {
	case code == http.StatusOK:
		want, err := decode()
		if err != nil {
			t.Fatalf("the server took a body its decoder refuses: %v", err)
		}
		defer ingest.Release(want)
		if !sameRows(want, got) {
			t.Fatalf("stored rows differ from those sent:\nsent %v\nread %v", want, got)
		}
	case code >= 400 && code < 500:
		if n := ingest.Rows(got); n != 0 {
			t.Fatalf("a %d (%s) stored %d rows", code, msg, n)
		}
	default:
		t.Fatalf("answer %d: %s", code, msg)
	}
}

func sameRows(a, b []arrow.RecordBatch) bool {
	if ingest.Rows(a) != ingest.Rows(b) {
		return false
	}
	if len(a) == 0 {
		return true
	}
	ta := array.NewTableFromRecords(fuzzSchema, a)
	defer ta.Release()
	tb := array.NewTableFromRecords(fuzzSchema, b)
	defer tb.Release()
	for i := range int(ta.NumCols()) {
		if !array.ChunkedEqual(ta.Column(i).Data(), tb.Column(i).Data()) {
			return false
		}
	}
	return true
}

func FuzzAppendJSONLines(f *testing.F) {
	for _, s := range []string{
		`{"id": 1, "msg": "a", "score": 0.5, "tags": ["x"], "meta": {"a": 3}}`,
		"{\"id\": 2}\n{\"id\": 3, \"msg\": null}\n",
		`{"id": null}`,
		`{"id": 1, "meta": {}}`,
		`{"id": 1, "mgs": 2}`,
		`{"id": 9223372036854775807, "score": 1e308, "tags": []}`,
	} {
		f.Add([]byte(s))
	}
	a := newAppendFuzzer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a.check(t, server.NDJSON, body, func() ([]arrow.RecordBatch, error) {
			return ingest.ReadJSONLines(bytes.NewReader(body), fuzzSchema, ingest.Options{})
		})
	})
}

func FuzzAppendIPC(f *testing.F) {
	b := array.NewRecordBuilder(testenv.Arrow, fuzzSchema)
	for i := range 4 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append("m")
		b.Field(2).(*array.Float64Builder).Append(float64(i) / 3)
		lb := b.Field(3).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.StringBuilder).Append("t")
		sb := b.Field(4).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.Int32Builder).Append(int32(i))
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	for _, opts := range [][]ipc.Option{nil, {ipc.WithLZ4()}} {
		var buf bytes.Buffer
		w := ipc.NewWriter(&buf, append([]ipc.Option{ipc.WithSchema(fuzzSchema)}, opts...)...)
		_ = w.Write(rec)
		_ = w.Close()
		f.Add(buf.Bytes())
	}
	a := newAppendFuzzer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a.check(t, server.ArrowStream, body, func() ([]arrow.RecordBatch, error) {
			_, recs, err := ingest.ReadIPC(bytes.NewReader(body), fuzzSchema, ingest.Options{})
			return recs, err
		})
	})
}
