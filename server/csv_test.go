package server_test

import (
	"encoding/csv"
	"net/http"
	"strings"
	"testing"

	"github.com/stratadb/strata/server"
)

// Rows come as CSV with format=csv or Accept: text/csv: a header line of
// the columns asked for, in their order (also for no rows), a null as an
// empty field, floats as Go writes them (NaN, +Inf, -Inf); a column CSV
// cannot hold is refused before the answer begins.
func TestRowsAsCSV(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	if code, body := raw(t, f, "PUT", "/api/v1/tables/t", "application/json",
		`{"fields":[{"name":"id","type":"int64"},{"name":"reward","type":"float64","nullable":true},{"name":"note","type":"string","nullable":true}]}`, ""); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	rows := `{"id":1,"reward":NaN,"note":"a,b"}` + "\n" + `{"id":2,"reward":Infinity,"note":null}` + "\n" + `{"id":3,"reward":-Infinity,"note":"say \"hi\""}` + "\n" + `{"id":4,"reward":null,"note":""}` + "\n"
	if code, body := raw(t, f, "POST", "/api/v1/tables/t/rows", "application/x-ndjson", rows, ""); code != http.StatusOK {
		t.Fatalf("append: %d %s", code, body)
	}
	code, body := raw(t, f, "GET", "/api/v1/tables/t/rows?format=csv&fresh=true", "", "", "")
	if code != http.StatusOK {
		t.Fatalf("scan: %d %s", code, body)
	}
	got, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatalf("the answer is not CSV: %v\n%s", err, body)
	}
	want := [][]string{{"id", "reward", "note"}, {"1", "NaN", "a,b"}, {"2", "+Inf", ""}, {"3", "-Inf", `say "hi"`}, {"4", "", ""}}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), body)
	}
	for i := range want {
		if strings.Join(got[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("line %d: %q, want %q", i, got[i], want[i])
		}
	}
	h := http.Header{"Accept": {"text/csv"}}
	resp, body := send(t, f, "GET", "/api/v1/tables/t/rows?columns=note,id&filter=id%20%3E%20100&fresh=true", h, "")
	if resp.StatusCode != http.StatusOK || body != "note,id\n" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("no rows, by Accept: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if code, body := raw(t, f, "PUT", "/api/v1/tables/nested", "application/json",
		`{"fields":[{"name":"id","type":"int64"},{"name":"tags","type":"list","items":{"type":"string"}}]}`, ""); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body := raw(t, f, "POST", "/api/v1/tables/nested/rows", "application/x-ndjson", `{"id":1,"tags":["x"]}`+"\n", ""); code != http.StatusOK {
		t.Fatalf("append: %d %s", code, body)
	}
	if code, body := raw(t, f, "GET", "/api/v1/tables/nested/rows?format=csv&fresh=true", "", "", ""); code != http.StatusBadRequest || !strings.Contains(body, `column \"tags\"`) {
		t.Fatalf("a list column as CSV: %d %s", code, body)
	}
}
