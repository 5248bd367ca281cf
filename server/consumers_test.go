package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/server"
	"github.com/stratadb/strata/table/format"
)

// A consumer's position is checked before it is stored: one at or below
// the garbage collector's boundary is 410 and a body naming no version is
// 400, and either leaves the consumer where it was (not on a collected
// version, not rewound to the table's creation).
func TestAConsumerPositionIsCheckedBeforeItIsStored(t *testing.T) {
	dir := t.TempDir()
	f := start(t, "file://"+dir, server.Options{})
	rec := rollouts.Batch(testenv.Allocator(t), 1, 0, 0, 3)
	defer rec.Release()
	if _, err := f.c.CreateTable(ctx, "events", rollouts.Schema, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Delete(ctx, "events", "id = 2"); err != nil {
		t.Fatal(err)
	}
	put := func(body string) (int, string) {
		return raw(t, f, "PUT", "/api/v1/tables/events/consumers/trainer", "application/json", body, "")
	}
	if code, body := put(`{"version": 0}`); code != http.StatusOK {
		t.Fatalf("PUT consumer at 0: %d %s", code, body)
	}
	b, err := blob.Open(ctx, "file://"+dir+"/events")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Put(ctx, format.GCBoundaryKey(1), bytes.NewReader(nil)); err != nil {
		t.Fatal(err)
	}
	position := func() uint64 {
		t.Helper()
		code, body := raw(t, f, "GET", "/api/v1/tables/events/consumers", "", "", "")
		var cs []api.Consumer
		if code != http.StatusOK || json.Unmarshal([]byte(body), &cs) != nil || len(cs) != 1 {
			t.Fatalf("GET consumers: %d %s", code, body)
		}
		return cs[0].Version
	}
	if code, body := put(`{"version": 1}`); code != http.StatusGone || !strings.Contains(body, api.CodeVersionCollected) {
		t.Fatalf("PUT consumer at a collected version: %d %s", code, body)
	}
	if v := position(); v != 0 {
		t.Fatalf("the refused position was stored: the consumer is at %d, want 0", v)
	}
	if code, body := put(`{"version": 2}`); code != http.StatusOK || position() != 2 {
		t.Fatalf("PUT consumer at 2: %d %s", code, body)
	}
	if code, body := put(`{}`); code != http.StatusBadRequest || !strings.Contains(body, "names no version") {
		t.Fatalf("PUT consumer {}: %d %s", code, body)
	}
	if v := position(); v != 2 {
		t.Fatalf("PUT {} rewound the consumer to %d", v)
	}
}
