package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/server"
)

// GET …/count counts what a scan with the same parameters reads: the
// client's own appends before any merge, every acknowledged row with
// fresh=true, a named version as it was; from statistics where they
// decide (no fragment read for a count without a filter), and a filter
// that names no column of the table is a 400.
func TestCountIsWhatAScanReads(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	schema := `{"fields":[{"name":"id","type":"int64"},{"name":"reward","type":"float64","nullable":true}]}`
	if code, msg := raw(t, f, "PUT", "/api/v1/tables/t", api.JSON, schema, ""); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, msg)
	}
	count := func(q url.Values) api.CountResult {
		t.Helper()
		code, body := raw(t, f, "GET", "/api/v1/tables/t/count?"+q.Encode(), "", "", "")
		if code != http.StatusOK {
			t.Fatalf("count %v: %d %s", q, code, body)
		}
		var res api.CountResult
		if err := json.Unmarshal([]byte(body), &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	lines := `{"id":1,"reward":0.5}
{"id":2,"reward":null}
{"id":3,"reward":0.9}
`
	if code, msg := post(t, f, "/api/v1/tables/t/rows", server.NDJSON, []byte(lines)); code != http.StatusOK {
		t.Fatalf("append: %d %s", code, msg)
	}
	if got := count(url.Values{"fresh": {"true"}, "filter": {"reward > 0.6"}}); got.Rows != 1 || !got.Scanned {
		t.Fatalf("fresh count of reward > 0.6: %+v, want 1 row, scanned", got)
	}
	// The client's own appends, before any merge.
	if _, err := f.c.AppendJSONLines(ctx, "t", []byte(`{"id":4,"reward":0.7}`+"\n")); err != nil {
		t.Fatal(err)
	}
	// (Its shard's entries before it are read too: rows 1 and 3 match.)
	if res, err := f.c.Count(ctx, "t", client.ScanOptions{Filter: "reward >= 0.5"}); err != nil || res.Rows != 3 {
		t.Fatalf("the client's count with its own row: %+v, %v; want 3", res, err)
	}
	if err := f.c.CheckpointLSM(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	all := count(url.Values{})
	if all.Rows != 4 || all.FragmentsScanned != 0 {
		t.Fatalf("count of every row: %+v, want 4 from statistics alone", all)
	}
	if got := count(url.Values{"filter": {"reward IS NULL OR id = 3"}}).Rows; got != 2 {
		t.Fatalf("count of reward IS NULL OR id = 3: %d, want 2", got)
	}
	if code, _ := raw(t, f, "DELETE", "/api/v1/tables/t/rows?filter=id%3D1", "", "", ""); code != http.StatusOK {
		t.Fatalf("delete: %d", code)
	}
	if got := count(url.Values{}).Rows; got != 3 {
		t.Fatalf("count after deleting one: %d, want 3", got)
	}
	if got := count(url.Values{"version": {strconv.FormatUint(all.Version, 10)}}).Rows; got != 4 {
		t.Fatalf("count at v%d: %d, want 4", all.Version, got)
	}
	if code, body := raw(t, f, "GET", "/api/v1/tables/t/count?filter=nosuch+%3D+1", "", "", ""); code != http.StatusBadRequest {
		t.Fatalf("count with an unknown column: %d %s, want 400", code, body)
	}
}
