package server_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/client"
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

// A named consumer over HTTP: its position is recorded with PUT, changes
// are asked after it (consumer=), a long poll (wait=) answers as soon as a
// version lands and, when none does, answers no rows naming the position.
func TestConsumersAndLongPolls(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	rec := rollouts.Batch(testenv.Allocator(t), 1, 0, 0, 3)
	defer rec.Release()
	if _, err := f.c.CreateTable(ctx, "events", rollouts.Schema, rec); err != nil {
		t.Fatal(err)
	}
	put := func(version string) (int, string) {
		return raw(t, f, "PUT", "/api/v1/tables/events/consumers/trainer", "application/json", `{"version": `+version+`}`, "")
	}
	if code, body := put("1"); code != http.StatusOK || !strings.Contains(body, `"version":1`) {
		t.Fatalf("PUT consumer: %d %s", code, body)
	}
	resp, body := send(t, f, "GET", "/api/v1/tables/events/changes?consumer=trainer&wait=50ms&format=jsonl", nil, "")
	if resp.StatusCode != http.StatusOK || body != "" || resp.Header.Get("Strata-Version") != "1" {
		t.Fatalf("a long poll with nothing new: %d %q through %s", resp.StatusCode, body, resp.Header.Get("Strata-Version"))
	}
	type answer struct {
		through string
		body    string
		err     error
	}
	polled := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("GET", f.http.URL+"/api/v1/tables/events/changes?consumer=trainer&wait=30s&format=jsonl&columns=id", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			polled <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, err = io.Copy(&b, resp.Body)
		polled <- answer{resp.Header.Get("Strata-Version"), b.String(), err}
	}()
	if _, err := f.c.Delete(ctx, "events", "id = 2"); err != nil {
		t.Fatal(err)
	}
	got := <-polled
	if got.err != nil || got.through != "2" || got.body != `{"id":2,"_change":"delete","_version":2}`+"\n" {
		t.Fatalf("the long poll across a delete: through %s %q %v", got.through, got.body, got.err)
	}
	code, body := raw(t, f, "GET", "/api/v1/tables/events/consumers", "", "", "")
	var cs []api.Consumer
	if code != http.StatusOK || json.Unmarshal([]byte(body), &cs) != nil || len(cs) != 1 || cs[0].Name != "trainer" || cs[0].Lag != 1 {
		t.Fatalf("GET consumers: %d %s", code, body)
	}
	for path, want := range map[string]int{
		"/api/v1/tables/events/changes?consumer=nobody": http.StatusNotFound,
		"/api/v1/tables/events/changes?consumer=a%2Fb":  http.StatusBadRequest,
		"/api/v1/tables/events/changes?from=0&wait=x":   http.StatusBadRequest,
		"/api/v1/tables/events/changes?from=9&wait=1m":  http.StatusBadRequest, // past the latest: at once
	} {
		if code, body := raw(t, f, "GET", path, "", "", ""); code != want {
			t.Errorf("GET %s: %d %s, want %d", path, code, body, want)
		}
	}
	if code, body := put("9"); code != http.StatusNotFound {
		t.Fatalf("PUT a consumer past the latest version: %d %s", code, body)
	}
	if code, body := raw(t, f, "DELETE", "/api/v1/tables/events/consumers/trainer", "", "", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE consumer: %d %s", code, body)
	}
	if code, _ := raw(t, f, "DELETE", "/api/v1/tables/events/consumers/trainer", "", "", ""); code != http.StatusNotFound {
		t.Fatalf("DELETE consumer twice: %d", code)
	}
}

// The Go client reads changes as Arrow with the version they were read
// through, and records a consumer's position.
func TestClientChangesAndConsumers(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	rec := rollouts.Batch(testenv.Allocator(t), 1, 0, 0, 3)
	defer rec.Release()
	if _, err := f.c.CreateTable(ctx, "events", rollouts.Schema, rec); err != nil {
		t.Fatal(err)
	}
	recs, through, err := f.c.Changes(ctx, "events", client.ChangesOptions{Columns: []string{"id"}})
	if err != nil || through != 1 || len(recs) != 1 || recs[0].NumRows() != 3 || recs[0].Schema().Field(1).Name != "_change" {
		t.Fatalf("changes from 0: %v through %d, %v", recs, through, err)
	}
	for _, r := range recs {
		r.Release()
	}
	if _, err := f.c.SetConsumer(ctx, "events", "trainer", through); err != nil {
		t.Fatal(err)
	}
	recs, through, err = f.c.Changes(ctx, "events", client.ChangesOptions{Consumer: "trainer", Wait: 20 * time.Millisecond})
	if err != nil || through != 1 || len(recs) != 0 {
		t.Fatalf("changes after the consumer, nothing new: %d batches through %d, %v", len(recs), through, err)
	}
	cs, err := f.c.Consumers(ctx, "events")
	if err != nil || len(cs) != 1 || cs[0].Version != 1 || cs[0].Lag != 0 {
		t.Fatalf("consumers: %+v %v", cs, err)
	}
	if err := f.c.DeleteConsumer(ctx, "events", "trainer"); err != nil {
		t.Fatal(err)
	}
	// filter= keeps the changed rows it matches; a filter that does not
	// parse, or names no column, is 400.
	recs, through, err = f.c.Changes(ctx, "events", client.ChangesOptions{Columns: []string{"id"}, Filter: "id >= 1"})
	n := 0
	for _, r := range recs {
		for _, id := range r.Column(0).(*array.Int64).Int64Values() {
			if id < 1 {
				t.Fatalf("filtered changes hold id %d", id)
			}
			n++
		}
		r.Release()
	}
	if err != nil || through != 1 || n != 2 {
		t.Fatalf("changes with filter id >= 1: %d rows through %d, %v; want 2", n, through, err)
	}
	for _, bad := range []string{"id >>= 1", "nope = 1"} {
		_, _, err := f.c.Changes(ctx, "events", client.ChangesOptions{Filter: bad})
		var e *client.Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest {
			t.Fatalf("changes with filter %q: %v, want 400", bad, err)
		}
	}
}

// POST …/restore commits an earlier version's rows, by version or tag.
func TestRestoreRoute(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	rec := rollouts.Batch(testenv.Allocator(t), 1, 0, 0, 3)
	defer rec.Release()
	if _, err := f.c.CreateTable(ctx, "events", rollouts.Schema, rec); err != nil {
		t.Fatal(err)
	}
	if err := f.c.CreateTag(ctx, "events", "three", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Delete(ctx, "events", "id >= 0"); err != nil {
		t.Fatal(err)
	}
	res, err := f.c.Restore(ctx, "events", 1)
	if err != nil || res.Version != 3 || res.Restored != 1 || res.Rows != 3 {
		t.Fatalf("restore of v1: %+v %v", res, err)
	}
	code, body := raw(t, f, "POST", "/api/v1/tables/events/restore", "application/json", `{"tag": "three"}`, "")
	if code != http.StatusOK || !strings.Contains(body, `"version":4`) || !strings.Contains(body, `"rows":3`) {
		t.Fatalf("restore by tag: %d %s", code, body)
	}
	for body, want := range map[string]int{
		`{}`:                             http.StatusBadRequest,
		`{"version": 1, "tag": "three"}`: http.StatusBadRequest,
		`{"version": 99}`:                http.StatusNotFound,
		`{"tag": "nope"}`:                http.StatusNotFound,
	} {
		if code, msg := raw(t, f, "POST", "/api/v1/tables/events/restore", "application/json", body, ""); code != want {
			t.Errorf("restore %s: %d %s, want %d", body, code, msg, want)
		}
	}
}
