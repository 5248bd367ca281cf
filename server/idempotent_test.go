package server_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/server"
)

// Named requests over HTTP (docs/format.md, "Idempotent appends"),
// pinned: a request sent again under its Idempotency-Key, or its producer
// and sequence number, answers the first outcome with Idempotent-Replayed
// and stores nothing, also after the server restarts; the same name with
// another body is 422 idempotency_key_reused; a sequence number below
// those kept is 409 sequence_expired; a name given two ways is 400.
func TestNamedRequestsAreStoredOnce(t *testing.T) {
	root := "file://" + t.TempDir()
	f := start(t, root, server.Options{})
	if _, err := f.c.CreateTable(ctx, "t", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	row := func(id int) string {
		return strings.Replace(`{"id":ID,"worker":"w00","step":0,"ts":1700000000000000,"reward":0.5,"prompt":"p","artifact":""}`, "ID", strconv.Itoa(id), 1) + "\n"
	}
	post := func(f *fixture, h http.Header, body string) (int, api.AppendResult, http.Header, string) {
		t.Helper()
		h = h.Clone()
		h.Set("Content-Type", api.NDJSON)
		resp, data := send(t, f, "POST", "/api/v1/tables/t/rows", h, body)
		var res api.AppendResult
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal([]byte(data), &res); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, res, resp.Header, data
	}
	byKey := http.Header{api.HeaderIdempotencyKey: {"batch-1"}}
	code, first, hdr, _ := post(f, byKey, row(1)+row(2))
	if code != 200 || first.Duplicate || first.Position == 0 || hdr.Get(api.HeaderReplayed) != "" {
		t.Fatalf("first request: %d %+v %v", code, first, hdr)
	}
	code, again, hdr, _ := post(f, byKey, row(1)+row(2))
	if code != 200 || !again.Duplicate || again.Position != first.Position || again.Rows != 2 || hdr.Get(api.HeaderReplayed) != "true" {
		t.Fatalf("sent again: %d %+v %v; want the first outcome, replayed", code, again, hdr)
	}
	if code, _, _, body := post(f, byKey, row(3)); code != http.StatusUnprocessableEntity || !strings.Contains(body, api.CodeKeyReused) {
		t.Fatalf("another body under the key: %d %s", code, body)
	}
	both := http.Header{api.HeaderIdempotencyKey: {"k"}, api.HeaderProducer: {"p"}, api.HeaderSequence: {"1"}}
	if code, _, _, body := post(f, both, row(4)); code != http.StatusBadRequest {
		t.Fatalf("a name given two ways: %d %s", code, body)
	}
	if code, _, _, body := post(f, http.Header{api.HeaderProducer: {"p"}}, row(4)); code != http.StatusBadRequest {
		t.Fatalf("a producer without a sequence number: %d %s", code, body)
	}
	seqHeader := func(n int) http.Header {
		return http.Header{api.HeaderProducer: {"client-a"}, api.HeaderSequence: {strconv.Itoa(n)}}
	}
	for n := range 12 {
		if code, res, _, body := post(f, seqHeader(n), row(100+n)); code != 200 || res.Duplicate {
			t.Fatalf("producer request %d: %d %s", n, code, body)
		}
	}
	if code, _, _, body := post(f, seqHeader(1), row(101)); code != http.StatusConflict || !strings.Contains(body, api.CodeSequenceExpired) {
		t.Fatalf("a sequence number below those kept: %d %s", code, body)
	}
	// The server dies and another takes its shard over: names survive.
	f.inject(fault.Always(fault.Fault{Action: fault.Crash}))
	g := start(t, root, server.Options{})
	if code, res, hdr, body := post(g, byKey, row(1)+row(2)); code != 200 || !res.Duplicate || res.Position != first.Position || hdr.Get(api.HeaderReplayed) != "true" {
		t.Fatalf("sent again after a restart: %d %s", code, body)
	}
	if code, res, _, body := post(g, seqHeader(11), row(111)); code != 200 || !res.Duplicate {
		t.Fatalf("producer request 11 sent again after a restart: %d %s", code, body)
	}
	if err := g.c.CheckpointLSM(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	recs, err := g.c.Scan(ctx, "t", client.ScanOptions{Columns: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	got := ids(t, recs)
	if len(got) != 14 || got[1] != 1 || got[2] != 1 || got[111] != 1 {
		t.Fatalf("table holds %v, want ids 1, 2 and 100–111 once each", got)
	}
}

// A create with rows sent again under its key answers its version 1.
func TestANamedCreateSentAgainAnswersItsTable(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	schema := `{"fields":[{"name":"id","type":"int64"}]}`
	h := http.Header{"Content-Type": {api.JSON}, api.HeaderIdempotencyKey: {"create-1"}}
	resp, body := send(t, f, "PUT", "/api/v1/tables/u", h, schema)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	resp, body2 := send(t, f, "PUT", "/api/v1/tables/u", h, schema)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get(api.HeaderReplayed) != "true" || body2 != body {
		t.Fatalf("create sent again: %d %s %v; want the first answer, replayed", resp.StatusCode, body2, resp.Header)
	}
	h.Set(api.HeaderIdempotencyKey, "create-2")
	if resp, body := send(t, f, "PUT", "/api/v1/tables/u", h, schema); resp.StatusCode != http.StatusConflict {
		t.Fatalf("create under another key: %d %s, want 409", resp.StatusCode, body)
	}
}
