package server_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/server"
)

// Two servers on one bucket (replicas, each with its own shard): a named
// request sent again to the other one is stored once.

func replicas(t *testing.T) (a, b *fixture) {
	t.Helper()
	root := "file://" + t.TempDir()
	a = start(t, root, server.Options{Instance: "replica-a"})
	b = start(t, root, server.Options{Instance: "replica-b"})
	if code, body := raw(t, a, "PUT", "/api/v1/tables/t", api.JSON, `{"fields":[{"name":"id","type":"int64"},{"name":"v","type":"string"}]}`, ""); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	return a, b
}

func postNamed(t *testing.T, f *fixture, query, key, body string) (api.AppendResult, http.Header) {
	t.Helper()
	h := http.Header{"Content-Type": {api.NDJSON}}
	if key != "" {
		h.Set(api.HeaderIdempotencyKey, key)
	}
	resp, data := send(t, f, "POST", "/api/v1/tables/t/rows"+query, h, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST rows%s: %d %s", query, resp.StatusCode, data)
	}
	var res api.AppendResult
	if err := json.Unmarshal([]byte(data), &res); err != nil {
		t.Fatal(err)
	}
	return res, resp.Header
}

func row(id int, v string) string {
	return `{"id":` + strconv.Itoa(id) + `,"v":"` + v + `"}` + "\n"
}

func TestAnAppendRetriedOnAnotherReplicaIsStoredOnce(t *testing.T) {
	a, b := replicas(t)
	postNamed(t, a, "", "batch-1", row(1, "x")+row(2, "x"))
	postNamed(t, b, "", "batch-1", row(1, "x")+row(2, "x")) // the retry: acknowledged
	postNamed(t, b, "", "batch-2", row(3, "x"))
	for _, f := range []*fixture{a, b} {
		if err := f.c.CheckpointLSM(ctx, "t"); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := a.c.Scan(ctx, "t", client.ScanOptions{Columns: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, recs); len(got) != 3 || got[1] != 1 || got[2] != 1 || got[3] != 1 {
		t.Fatalf("table holds %v, want ids 1, 2 and 3 once each", got)
	}
}

func TestAnUpsertRetriedAfterALaterUpsertOfItsKeyChangesNothing(t *testing.T) {
	a, b := replicas(t)
	first, _ := postNamed(t, a, "?mode=upsert&key=id", "up-1", row(1, "old"))
	postNamed(t, b, "?mode=upsert&key=id", "up-2", row(1, "new"))
	again, hdr := postNamed(t, b, "?mode=upsert&key=id", "up-1", row(1, "old")) // the first one's retry
	if !again.Duplicate || again.Version != first.Version || hdr.Get(api.HeaderReplayed) != "true" {
		t.Fatalf("the retry: %+v %v, want the first outcome (v%d), replayed", again, hdr, first.Version)
	}
	_, data := send(t, a, "GET", "/api/v1/tables/t/rows?format=jsonl", nil, "")
	if data != row(1, "new") {
		t.Fatalf("table holds %q, want the later upsert's row alone", data)
	}
}

// An upsert through a shard, retried on the other replica after a later
// upsert of its key, changes nothing when that replica merges: the merge
// finds its name installed and drops the copy, so the later upserts' rows
// stay: one merged before, and one acknowledged by the same replica just
// before the retry, flushed with it. Another upsert flushed after it is
// installed.
func TestAnUpsertThroughAShardRetriedOnAnotherReplicaChangesNothing(t *testing.T) {
	a, b := replicas(t)
	const shard = "?mode=upsert&key=id&through=shard"
	merge := func(f *fixture) {
		t.Helper()
		if err := f.c.CheckpointLSM(ctx, "t"); err != nil {
			t.Fatal(err)
		}
	}
	postNamed(t, a, shard, "up-1", row(1, "old")+row(2, "old"))
	merge(a)
	postNamed(t, b, shard, "up-2", row(1, "new"))
	merge(b)
	postNamed(t, b, shard, "up-3", row(3, "z")+row(2, "older"))
	postNamed(t, b, shard, "up-1", row(1, "old")+row(2, "old")) // up-1's retry, flushed with up-3
	postNamed(t, b, shard, "up-4", row(4, "w"))
	want := []string{row(1, "new"), row(2, "older"), row(3, "z"), row(4, "w")}
	holds := func(what, data string) {
		t.Helper()
		got := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(data), "\n") {
			got[l] = true
		}
		for _, w := range want {
			if !got[strings.TrimSpace(w)] || len(got) != len(want) {
				t.Fatalf("%s holds\n%s\nwant %q", what, data, want)
			}
		}
	}
	// A fresh read leaves the retry out, as the merge will.
	_, data := send(t, b, "GET", "/api/v1/tables/t/rows?format=jsonl&fresh=true", nil, "")
	holds("a fresh read", data)
	merge(b)
	_, data = send(t, a, "GET", "/api/v1/tables/t/rows?format=jsonl", nil, "")
	holds("the table", data)
}
