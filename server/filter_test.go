package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/server"
)

// The filter language over HTTP: OR, NOT, IS NULL, LIKE, BETWEEN and NOT
// IN select in a scan (fresh and merged) and in a delete; a filter that
// does not parse is a 400 naming what is wrong.
func TestFilterLanguageOverHTTP(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	schema := `{"fields":[{"name":"id","type":"int64"},{"name":"worker","type":"string","nullable":true},{"name":"reward","type":"float64","nullable":true}]}`
	if code, msg := raw(t, f, "PUT", "/api/v1/tables/t", api.JSON, schema, ""); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, msg)
	}
	lines := `{"id":1,"worker":"w01","reward":0.5}
{"id":2,"worker":"w02","reward":null}
{"id":3,"worker":"x03","reward":0.9}
{"id":4,"worker":null,"reward":0.1}
{"id":5,"worker":"w05","reward":0.7}
`
	if code, msg := post(t, f, "/api/v1/tables/t/rows", server.NDJSON, []byte(lines)); code != http.StatusOK {
		t.Fatalf("append: %d %s", code, msg)
	}
	ids := func(filter string, fresh bool) string {
		t.Helper()
		q := url.Values{"format": {"jsonl"}, "columns": {"id"}, "filter": {filter}}
		if fresh {
			q.Set("fresh", "true")
		}
		code, body := raw(t, f, "GET", "/api/v1/tables/t/rows?"+q.Encode(), "", "", "")
		if code != http.StatusOK {
			t.Fatalf("scan %q: %d %s", filter, code, body)
		}
		return strings.Join(strings.Fields(strings.NewReplacer(`{"id":`, "", "}", "").Replace(body)), ",")
	}
	cases := map[string]string{
		"reward IS NULL OR reward > 0.8":                        "2,3",
		"NOT reward > 0.4":                                      "4",
		"worker LIKE 'w0%' AND reward BETWEEN 0.5 AND 0.7":      "1,5",
		"worker NOT IN ('w01', 'w02') AND NOT (worker IS NULL)": "3,5",
		"(id = 1 OR id = 4) AND worker IS NOT NULL":             "1",
	}
	for _, fresh := range []bool{true, false} {
		if !fresh {
			if err := f.c.CheckpointLSM(ctx, "t"); err != nil {
				t.Fatal(err)
			}
		}
		for filter, want := range cases {
			if got := ids(filter, fresh); got != want {
				t.Errorf("fresh %v, %q: ids %s, want %s", fresh, filter, got, want)
			}
		}
	}
	if code, body := raw(t, f, "DELETE", "/api/v1/tables/t/rows?"+url.Values{"filter": {"worker IS NULL OR worker LIKE 'x%'"}}.Encode(), "", "", ""); code != http.StatusOK || !strings.Contains(body, `"deleted":2`) {
		t.Fatalf("delete by OR: %d %s", code, body)
	}
	if got := ids("id > 0", false); got != "1,2,5" {
		t.Fatalf("after the delete: ids %s", got)
	}
	if code, body := raw(t, f, "GET", "/api/v1/tables/t/rows?"+url.Values{"filter": {"reward = NULL"}}.Encode(), "", "", ""); code != http.StatusBadRequest || !strings.Contains(body, "IS NULL") {
		t.Fatalf("a comparison with NULL: %d %s", code, body)
	}
}
