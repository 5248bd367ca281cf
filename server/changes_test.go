package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/server"
)

// GET …/changes answers the rows inserted and deleted after a version,
// each with _change and _version, as JSON lines or Arrow, and names the
// version it read through; a range garbage collection removed is 410,
// naming the oldest version left.
func TestChangesRoute(t *testing.T) {
	dir := t.TempDir()
	f := start(t, "file://"+dir, server.Options{})
	rec := rollouts.Batch(testenv.Allocator(t), 1, 0, 0, 3)
	defer rec.Release()
	if _, err := f.c.CreateTable(ctx, "events", rollouts.Schema, rec); err != nil {
		t.Fatal(err)
	}
	if res, err := f.c.Delete(ctx, "events", "id = 1"); err != nil || res.Deleted != 1 {
		t.Fatalf("delete: %+v %v", res, err)
	}
	resp, body := send(t, f, "GET", "/api/v1/tables/events/changes?from=0&columns=id&format=jsonl", nil, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("changes: %d %s", resp.StatusCode, body)
	}
	through := resp.Header.Get("Strata-Version")
	type line struct {
		ID      int64  `json:"id"`
		Change  string `json:"_change"`
		Version uint64 `json:"_version"`
	}
	var got []line
	for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
		var x line
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		got = append(got, x)
	}
	if len(got) != 4 || got[0] != (line{0, "insert", 1}) || got[2] != (line{2, "insert", 1}) || got[3].ID != 1 || got[3].Change != "delete" ||
		through != "2" || got[3].Version != 2 {
		t.Fatalf("changes from 0 through %s: %+v", through, got)
	}
	// Arrow: the schema of the last version and the two columns.
	resp, body = send(t, f, "GET", "/api/v1/tables/events/changes?from=1", nil, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("changes as Arrow: %d %s", resp.StatusCode, body)
	}
	rd, err := ipc.NewReader(bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	n := 0
	for rd.Next() {
		r := rd.RecordBatch()
		s := r.Schema()
		kinds := r.Column(s.FieldIndices("_change")[0]).(*array.String)
		ids := r.Column(s.FieldIndices("id")[0]).(*array.Int64)
		for i := range int(r.NumRows()) {
			if kinds.Value(i) != "delete" || ids.Value(i) != 1 {
				t.Fatalf("change %d from 1: %s of id %d", n, kinds.Value(i), ids.Value(i))
			}
			n++
		}
	}
	if n != 1 || rd.Err() != nil {
		t.Fatalf("changes from 1 as Arrow: %d rows, %v", n, rd.Err())
	}
	for path, want := range map[string]int{
		"/api/v1/tables/events/changes":             http.StatusBadRequest,
		"/api/v1/tables/events/changes?from=3&to=2": http.StatusBadRequest,
		"/api/v1/tables/events/changes?from=0&to=9": http.StatusNotFound,
	} {
		if code, body := raw(t, f, "GET", path, "", "", ""); code != want {
			t.Errorf("GET %s: %d %s, want %d", path, code, body, want)
		}
	}
	// Collected: version 1 is gone once GC keeps only the newest.
	b, err := blob.Open(ctx, "file://"+dir+"/events")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1}, time.Now().Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	code, body := raw(t, f, "GET", "/api/v1/tables/events/changes?from=0", "", "", "")
	if code != http.StatusGone || !strings.Contains(body, api.CodeVersionCollected) || !strings.Contains(body, "oldest readable version is 2") {
		t.Fatalf("changes from a collected version: %d %s", code, body)
	}
}
