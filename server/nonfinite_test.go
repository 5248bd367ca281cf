package server_test

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/server"
)

// An update over HTTP sets a float column to NaN or an infinity, written
// bare as Python's json writes them (and as JSON lines answers hold NaN)
// or as strings, and through the Go client from a Go float; the words
// inside a string stay a string, and a column of another type refuses
// them.
func TestAnUpdateSetsNaNAndTheInfinitiesOverHTTP(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(testenv.Allocator(t), schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3, 4, 5}, nil)
	b.Field(1).(*array.Float64Builder).AppendValues([]float64{1, 2, 3, 4, 5}, nil)
	b.Field(2).(*array.StringBuilder).AppendValues([]string{"a", "b", "c", "d", "e"}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	if _, err := f.c.CreateTable(ctx, "t", schema, rec); err != nil {
		t.Fatal(err)
	}
	patch := func(id int, body string) (int, string) {
		return raw(t, f, "PATCH", "/api/v1/tables/t/rows?filter=id%3D"+string(rune('0'+id)), "application/json", body, "")
	}
	for id, body := range map[int]string{
		1: `{"set":{"x":NaN}}`,
		2: `{"set": {"x": -Infinity, "note": "NaN, Infinity \"-Infinity\""}}`,
		3: `{"set":{"x":"Infinity"}}`,
	} {
		if code, out := patch(id, body); code != http.StatusOK {
			t.Fatalf("PATCH %s: %d %s", body, code, out)
		}
	}
	if _, err := f.c.Update(ctx, "t", "id = 4", map[string]any{"x": math.NaN(), "note": "n"}); err != nil {
		t.Fatalf("an update to NaN through the Go client: %v", err)
	}
	for _, body := range []string{`{"set":{"note":NaN}}`, `{"set":{"id":Infinity}}`, `{"set":{"id":"NaN"}}`, `{"set":{"x":"abc"}}`, `{"set":{"x":NaNa}}`} {
		if code, out := patch(5, body); code != http.StatusBadRequest {
			t.Fatalf("PATCH %s: %d %s, want 400", body, code, out)
		}
	}
	// A word that is not a whole value, or not inside the body's object,
	// is refused as it was sent; no object a client writes stands for a
	// float.
	for _, body := range []string{`{"set":{"x":NaNNaN}}`, `{"set":{"x":-NaN}}`, `NaN`, `{"set":{"x":{"\u0000float":"NaN"}}}`} {
		code, out := patch(5, body)
		if code != http.StatusBadRequest || strings.Contains(out, "'{'") || strings.Contains(out, "float") {
			t.Fatalf("PATCH %s: %d %s, want 400 about what was sent", body, code, out)
		}
	}
	got := xAndNote(t, f.c)
	want := map[int64]string{1: "NaN a", 2: `-Inf NaN, Infinity "-Infinity"`, 3: "+Inf c", 4: "NaN n", 5: "5 e"}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("row %d: %q, want %q", id, got[id], w)
		}
	}
}

// An update over HTTP sets columns to expressions over the row (set_sql,
// as the CLI's --set), alone or beside constants (set), through the Go
// client too; a bad expression is a 400 naming it, and nothing changes.
func TestAnUpdateSetsExpressionsOverHTTP(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(testenv.Allocator(t), schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	b.Field(1).(*array.Float64Builder).AppendValues([]float64{1, 2, 3}, nil)
	b.Field(2).(*array.StringBuilder).AppendValues([]string{"a", "b", "c"}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	if _, err := f.c.CreateTable(ctx, "t", schema, rec); err != nil {
		t.Fatal(err)
	}
	if code, out := raw(t, f, "PATCH", "/api/v1/tables/t/rows?filter=id%3E1", "application/json",
		`{"set_sql": "x = x * 10 + id", "set": {"note": "scaled"}}`, ""); code != http.StatusOK || !strings.Contains(out, `"updated":2`) {
		t.Fatalf("PATCH set_sql: %d %s", code, out)
	}
	if res, err := f.c.UpdateSQL(ctx, "t", "id = 1", "x = -x / 4"); err != nil || res.Updated != 1 {
		t.Fatalf("UpdateSQL: %+v %v", res, err)
	}
	v, err := f.c.Describe(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for body, want := range map[string]string{
		`{"set_sql": "x = note * 2"}`:           "arithmetic on numbers only",
		`{"set_sql": "x = nope + 1"}`:           "nope",
		`{"set_sql": "x = x +"}`:                "bad assignment",
		`{"set_sql": "x = 1", "set": {"x": 2}}`: "x is set twice",
		`{"set_sql": "id = x"}`:                 "integer arithmetic only",
		`{}`:                                    "at least one column",
	} {
		if code, out := raw(t, f, "PATCH", "/api/v1/tables/t/rows?filter=id%3E0", "application/json", body, ""); code != http.StatusBadRequest || !strings.Contains(out, want) {
			t.Errorf("PATCH %s: %d %s, want 400 saying %q", body, code, out, want)
		}
	}
	if after, err := f.c.Describe(ctx, "t"); err != nil || after.Version != v.Version {
		t.Fatalf("refused updates committed: v%d, then %+v %v", v.Version, after, err)
	}
	got := xAndNote(t, f.c)
	want := map[int64]string{1: "-0.25 a", 2: "22 scaled", 3: "33 scaled"}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("row %d: %q, want %q", id, got[id], w)
		}
	}
}

// xAndNote reads table t's rows (id, x, note) as "x note" by id, x as Go
// formats a float.
func xAndNote(t *testing.T, c *client.Client) map[int64]string {
	t.Helper()
	recs, err := c.Scan(ctx, "t", client.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	for _, r := range recs {
		for i := range int(r.NumRows()) {
			x := r.Column(1).(*array.Float64).Value(i)
			got[r.Column(0).(*array.Int64).Value(i)] = strconv.FormatFloat(x, 'g', -1, 64) + " " + r.Column(2).(*array.String).Value(i)
		}
		r.Release()
	}
	return got
}
