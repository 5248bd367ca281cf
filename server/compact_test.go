package server_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	jobpkg "github.com/stratadb/strata/job"
	"github.com/stratadb/strata/server"
)

// tableURL is the URL of table name under the bucket URL root.
func tableURL(root, name string) string {
	base, query, _ := strings.Cut(root, "?")
	if query != "" {
		query = "?" + query
	}
	return base + "/" + name + query
}

// compactTable makes a table of n small fragments (direct appends) under
// root and returns its bucket.
func compactTable(t *testing.T, f *fixture, root string, n int) blob.Bucket {
	t.Helper()
	if _, err := f.c.CreateTable(ctx, "t", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	b, err := blob.Open(ctx, tableURL(root, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		rec := rollouts.Batch(testenv.Allocator(t), 42, 1, int64(i*10), 10)
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	return b
}

func compactStats(t *testing.T, f *fixture) map[string]any {
	t.Helper()
	code, body := raw(t, f, "GET", "/api/v1/tables/t/compact/stats", "", "", "")
	var out map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &out) != nil {
		t.Fatalf("compact stats: %d %s", code, body)
	}
	return out
}

// POST /compact and the compactor Job share the table's lease: while the
// Job holds it the server answers 409 naming it and stats show it
// running; run at once, exactly one of them compacts and no row is lost.
func TestCompactTakesTheTablesLease(t *testing.T) {
	root := testenv.MinIO(t).URL(t)
	f := start(t, root, server.Options{})
	b := compactTable(t, f, root, 6)

	st := compactStats(t, f)
	for _, k := range []string{"last_compaction", "last_error", "last_error_at", "holder", "lease_expires"} {
		if v, ok := st[k]; !ok || v != nil {
			t.Fatalf("%s: want null before any run, got %v (%v)", k, v, ok)
		}
	}
	if st["running"] != false || st["due"] != false || !strings.Contains(st["due_reason"].(string), "below min") {
		t.Fatalf("stats of a fresh table: %v", st)
	}

	job, err := compactor.TakeLease(ctx, b, "strata-compactor on node-7", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	code, body := raw(t, f, "POST", "/api/v1/tables/t/compact", "", "", "")
	if code != http.StatusConflict || !strings.Contains(body, `"lease_held"`) || !strings.Contains(body, "strata-compactor on node-7") {
		t.Fatalf("POST /compact under the Job's lease: %d %s", code, body)
	}
	if st := compactStats(t, f); st["running"] != true || st["holder"] != "strata-compactor on node-7" || st["lease_expires"] == nil {
		t.Fatalf("stats while the Job holds the lease: %v", st)
	}
	if err := job.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Both at once.
	jobOpts := jobpkg.Options{Tables: []string{tableURL(root, "t")}, Holder: "job", NoGC: true, NoMerge: true,
		Policy: compactor.Policy{MinFragments: 2}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var wg sync.WaitGroup
	var sum jobpkg.Summary
	var jobErr error
	wg.Go(func() { sum, jobErr = jobpkg.RunOnce(ctx, &jobOpts) })
	resp, data := send(t, f, "POST", "/api/v1/tables/t/compact", nil, "")
	wg.Wait()
	if jobErr != nil {
		t.Fatal(jobErr)
	}
	serverRan := resp.StatusCode == http.StatusAccepted
	switch {
	case serverRan:
		if loc := resp.Header.Get("Location"); loc != "/api/v1/tables/t/compact/stats" {
			t.Fatalf("202 without the stats Location: %q", loc)
		}
	case resp.StatusCode == http.StatusConflict && strings.Contains(data, `"lease_held"`) && strings.Contains(data, "job"):
	default:
		t.Fatalf("POST /compact beside the Job: %d %s", resp.StatusCode, data)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := compactStats(t, f)
		if st["running"] == false && st["total_compactions"].(float64) >= 1 {
			if st["total_compactions"].(float64) != 1 || st["fragments"].(float64) != 1 || st["last_compaction"] == nil || st["last_error"] != nil {
				t.Fatalf("after the server (%v) and the Job (%+v) ran at once: %v", serverRan, sum.Outcomes, st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no compaction finished: %v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	recs, err := f.c.Scan(ctx, "t", client.ScanOptions{Columns: []string{"id"}})
	if got := ids(t, recs); err != nil || len(got) != 60 {
		t.Fatalf("after compaction: %d ids (%v)", len(got), err)
	}
}

// POST /compact takes options: a dry run answers the plan, a minimum not
// reached is 409 not_due, a body that is not a request is 400 and one of
// another type 415.
func TestCompactOptions(t *testing.T) {
	root := "file://" + t.TempDir()
	f := start(t, root, server.Options{})
	compactTable(t, f, root, 5)
	code, body := raw(t, f, "POST", "/api/v1/tables/t/compact", "application/json", `{"dry_run":true}`, "")
	var plan api.CompactPlan
	if code != 200 || json.Unmarshal([]byte(body), &plan) != nil || plan.FragmentsBefore != 5 || plan.FragmentsAfter != 1 || plan.Bins != 1 {
		t.Fatalf("dry run: %d %s", code, body)
	}
	code, body = raw(t, f, "POST", "/api/v1/tables/t/compact", "application/json", `{"min_fragments":10}`, "")
	if code != http.StatusConflict || !strings.Contains(body, `"not_due"`) {
		t.Fatalf("below the minimum: %d %s", code, body)
	}
	code, body = raw(t, f, "POST", "/api/v1/tables/t/compact", "application/json", `{"min_fragmnts":2}`, "")
	if code != http.StatusBadRequest {
		t.Fatalf("a misspelt option: %d %s", code, body)
	}
	code, body = raw(t, f, "POST", "/api/v1/tables/t/compact", "application/json", `{"dry_run":true}{"force":true}`, "")
	if code != http.StatusBadRequest {
		t.Fatalf("two requests in one body: %d %s", code, body)
	}
	code, body = raw(t, f, "POST", "/api/v1/tables/t/compact", "text/csv", `a,b`, "")
	if code != http.StatusUnsupportedMediaType {
		t.Fatalf("a CSV body: %d %s", code, body)
	}
	if st := compactStats(t, f); st["total_compactions"].(float64) != 0 || len(st["history"].([]any)) != 0 {
		t.Fatalf("refused requests recorded runs: %v", st)
	}
	code, body = raw(t, f, "POST", "/api/v1/tables/t/compact", "application/json", `{"min_fragments":5,"target_rows":44}`, "")
	if code != http.StatusAccepted {
		t.Fatalf("with options: %d %s", code, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := compactStats(t, f)
		if st["total_compactions"].(float64) == 1 && st["running"] == false {
			if st["fragments"].(float64) != 2 { // 4 × 10 rows fit 44, the fifth stays
				t.Fatalf("target_rows 44 over 5 fragments of 10 rows: %v", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no compaction: %v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The table verbs over HTTP: list tables, delete rows by filter, create a
// tag (with its time) and delete it; and the conventions: 405 with Allow,
// 415 for a JSON route sent something else.
func TestTableVerbsAndConventions(t *testing.T) {
	root := "file://" + t.TempDir()
	f := start(t, root, server.Options{})
	for _, name := range []string{"a", "b"} {
		if _, err := f.c.CreateTable(ctx, name, rollouts.Schema); err != nil {
			t.Fatal(err)
		}
	}
	tables, err := f.c.Tables(ctx)
	if err != nil || len(tables) != 2 || tables[0].Name != "a" || tables[1].Name != "b" || tables[0].Version != 1 {
		t.Fatalf("tables: %+v %v", tables, err)
	}

	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 40)
	defer rec.Release()
	if _, err := f.c.Append(ctx, "a", rec); err != nil {
		t.Fatal(err)
	}
	// Rows this server acknowledged are subject to the delete, merged or not.
	res, err := f.c.Delete(ctx, "a", "id < 10")
	if err != nil || res.Deleted != 10 || res.Version == 0 {
		t.Fatalf("delete: %+v %v", res, err)
	}
	recs, err := f.c.Scan(ctx, "a", client.ScanOptions{Columns: []string{"id"}})
	got := ids(t, recs)
	if err != nil || len(got) != 30 {
		t.Fatalf("after deleting 10 of 40: %d rows (%v)", len(got), err)
	}
	for id := range got {
		if id < 10 {
			t.Fatalf("deleted id %d still scanned", id)
		}
	}
	if code, body := raw(t, f, "DELETE", "/api/v1/tables/a/rows", "", "", ""); code != http.StatusBadRequest || !strings.Contains(body, "filter= is required") {
		t.Fatalf("delete without a filter: %d %s", code, body)
	}

	code, body := raw(t, f, "POST", "/api/v1/tables/a/tags", "application/json", `{"name":"keep"}`, "")
	var tag struct {
		Name    string    `json:"name"`
		Version uint64    `json:"version"`
		Created time.Time `json:"created"`
	}
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &tag) != nil || tag.Version != res.Version || time.Since(tag.Created) > time.Minute {
		t.Fatalf("create tag: %d %s", code, body)
	}
	if err := f.c.DeleteTag(ctx, "a", "keep"); err != nil {
		t.Fatal(err)
	}
	if err := f.c.DeleteTag(ctx, "a", "keep"); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("deleting a missing tag: %v", err)
	}

	resp, data := send(t, f, "PUT", "/api/v1/tables/a/rows", nil, "")
	allow := resp.Header.Get("Allow")
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(allow, "GET") || !strings.Contains(allow, "POST") ||
		!strings.Contains(allow, "DELETE") || !strings.Contains(allow, "PATCH") || !strings.Contains(data, `"method_not_allowed"`) {
		t.Fatalf("PUT rows: %d Allow=%q %s", resp.StatusCode, allow, data)
	}
	if code, body := raw(t, f, "GET", "/api/v1/nothing", "", "", ""); code != http.StatusNotFound || !strings.Contains(body, `"no_route"`) {
		t.Fatalf("no route: %d %s", code, body)
	}
	for _, path := range []string{"/api/v1/tables/a/take", "/api/v1/tables/a/tags"} {
		if code, body := raw(t, f, "POST", path, "text/plain", `{"keys":[1]}`, ""); code != http.StatusUnsupportedMediaType {
			t.Fatalf("POST %s as text/plain: %d %s", path, code, body)
		}
	}
}

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Every request gets a request id (the client's, when it is a plain
// token) in X-Request-Id and one access-log line naming it.
func TestRequestIDsAndTheAccessLog(t *testing.T) {
	var logs lockedBuffer
	f := start(t, "file://"+t.TempDir(), server.Options{Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	get := func(id string) string {
		req, err := http.NewRequest("GET", f.http.URL+"/api/v1/tables/none", nil)
		if err != nil {
			t.Fatal(err)
		}
		if id != "" {
			req.Header.Set("X-Request-Id", id)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("X-Request-Id")
	}
	if got := get("trace-42.a"); got != "trace-42.a" {
		t.Fatalf("the client's id came back as %q", got)
	}
	fresh := get("")
	bad := get(`<script>"`)
	if fresh == "" || bad == "" || bad == `<script>"` || fresh == bad {
		t.Fatalf("fresh ids: %q, for a bad one %q", fresh, bad)
	}
	var seen int
	for line := range strings.Lines(logs.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] != "request" {
			continue
		}
		if m["request_id"] == "trace-42.a" && m["status"] == float64(404) && m["route"] == "GET /api/v1/tables/{name}" && m["method"] == "GET" {
			seen++
		}
		if m["request_id"] == fresh {
			seen++
		}
	}
	if seen != 2 {
		t.Fatalf("access log:\n%s", logs.String())
	}
}

// Shutdown during a background compaction cancels it and returns only
// once it has stopped: no request follows, the lease is released, and the
// table is intact.
func TestShutdownStopsARunningCompaction(t *testing.T) {
	root := "file://" + t.TempDir()
	f := start(t, root, server.Options{})
	b := compactTable(t, f, root, 8)
	// Every read of a fragment takes 200 ms: the compaction is slow.
	f.inject(fault.OnKeys(regexp.MustCompile(`^data/`), fault.OnOps(fault.Always(fault.Fault{Delay: 200 * time.Millisecond}), fault.OpGet, fault.OpRangeGet)))
	if code, body := raw(t, f, "POST", "/api/v1/tables/t/compact", "", "", ""); code != http.StatusAccepted {
		t.Fatalf("compact: %d %s", code, body)
	}
	if st := compactStats(t, f); st["running"] != true {
		t.Fatalf("not running: %v", st)
	}
	f.http.Close()
	if err := f.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	served, ok := blob.StatsOf(f.faults)
	if !ok || served.Requests() == 0 {
		t.Fatal("the table's bucket counts no requests")
	}
	time.Sleep(500 * time.Millisecond)
	if later, _ := blob.StatsOf(f.faults); later.Requests() != served.Requests() {
		t.Fatalf("%d requests after Shutdown returned", later.Requests()-served.Requests())
	}
	if _, held, err := compactor.CurrentLease(ctx, b, time.Now()); err != nil || held {
		t.Fatalf("the lease outlived the shutdown (%v)", err)
	}
	st, err := compactor.ReadStatus(ctx, b, 1)
	if err != nil || st.TotalCompactions != 0 {
		t.Fatalf("status after a cancelled compaction: %+v %v", st, err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil || tb.Current().Manifest().Rows() != 80 || len(tb.Current().Manifest().Fragments) != 8 {
		t.Fatalf("table after the shutdown: %v", err)
	}
}
