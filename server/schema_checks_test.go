package server_test

import (
	"bytes"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/server"
)

// A table created over HTTP with a timestamp in a time zone Arrow cannot
// resolve would print every value as "...": the create is refused, naming
// the column and the zone, and no table is left behind.
func TestCreateRefusesAnUnknownTimeZone(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	mars := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Mars/Olympus"}}}, nil)
	_, err := f.c.CreateTable(ctx, "mars", mars)
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Code != api.CodeUnsupportedSchema ||
		!strings.Contains(ae.Message, `field "at"`) || !strings.Contains(ae.Message, `"Mars/Olympus"`) {
		t.Fatalf("create in Mars/Olympus: %v", err)
	}
	if _, err := f.c.Describe(ctx, "mars"); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("the refused create left a table: %v", err)
	}
	paris := arrow.NewSchema([]arrow.Field{{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Europe/Paris"}}}, nil)
	if _, err := f.c.CreateTable(ctx, "paris", paris); err != nil {
		t.Fatalf("create in Europe/Paris: %v", err)
	}
}

// The Go client selects columns whose names hold a comma, a backtick or
// spaces at their ends: it quotes them as columns= reads them.
func TestTheClientSelectsColumnsOfAnyName(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	names := []string{"id", "a,b", "`tick", " lead"}
	fields := make([]arrow.Field, len(names))
	for i, n := range names {
		fields[i] = arrow.Field{Name: n, Type: arrow.PrimitiveTypes.Int64}
	}
	schema := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range names {
		b.Field(i).(*array.Int64Builder).Append(int64(i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if _, err := f.c.CreateTable(ctx, "odd", schema, rec); err != nil {
		t.Fatal(err)
	}
	for _, cols := range [][]string{{"a,b"}, {"`tick", "id"}, {" lead", "a,b"}} {
		recs, err := f.c.Scan(ctx, "odd", client.ScanOptions{Columns: cols})
		if err != nil {
			t.Fatalf("scan %q: %v", cols, err)
		}
		got := []string{}
		for _, fld := range recs[0].Schema().Fields() {
			got = append(got, fld.Name)
		}
		for _, r := range recs {
			r.Release()
		}
		if !slices.Equal(got, cols) {
			t.Fatalf("scan %q read the columns %q", cols, got)
		}
	}
}

// An Arrow IPC append whose columns do not fit the table is refused the
// same whether it carries rows or not: a schema-only stream of another
// table's columns was answered 200 {"rows":0}.
func TestASchemaOnlyAppendIsCheckedAsOneWithRows(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	if _, err := f.c.CreateTable(ctx, "events", events); err != nil {
		t.Fatal(err)
	}
	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Float64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, other)
	defer b.Release()
	b.Field(0).(*array.Float64Builder).Append(1)
	one := b.NewRecordBatch()
	defer one.Release()
	var schemaOnly bytes.Buffer
	if err := ipc.NewWriter(&schemaOnly, ipc.WithSchema(other)).Close(); err != nil {
		t.Fatal(err)
	}
	const rows = "/api/v1/tables/events/rows"
	codeRows, withRows := post(t, f, rows, server.ArrowStream, ipcStream(t, nil, one))
	codeNone, withNone := post(t, f, rows, server.ArrowStream, schemaOnly.Bytes())
	if codeRows != http.StatusBadRequest || codeNone != codeRows || withNone != withRows {
		t.Fatalf("with a row: %d %s\nschema only: %d %s", codeRows, withRows, codeNone, withNone)
	}
	fits := eventBatch()
	defer fits.Release()
	if code, body := post(t, f, rows, server.ArrowStream, ipcStream(t, nil, fits)); code != http.StatusOK || !strings.Contains(body, `"rows":0`) {
		t.Fatalf("an empty batch of the table's columns: %d %s", code, body)
	}
}
