package client_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/client"
)

// seen is one request a test server received.
type seen struct{ method, path, ctype, body string }

// recorder starts a server that answers every request with status and
// body and records what it received.
func recorder(t *testing.T, status int, body string) (*client.Client, func() []seen) {
	t.Helper()
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.Path, r.Header.Get("Content-Type"), string(b)})
		mu.Unlock()
		if body != "" {
			w.Header().Set("Content-Type", api.JSON)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// Merge asks for a merge of generations by its name, …/lsm/merge (the old
// name, …/lsm/compact, still works on the server).
func TestMergeRequestsLSMMerge(t *testing.T) {
	c, got := recorder(t, http.StatusAccepted, "")
	if err := c.Merge(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	if want := []seen{{"POST", "/api/v1/tables/t/lsm/merge", "", ""}}; !slices.Equal(got(), want) {
		t.Errorf("Merge sent %+v, want %+v", got(), want)
	}
}

// Compact sends its options as the Python client does: the fields that
// are set, as JSON; without options, no body.
func TestCompactSendsItsOptions(t *testing.T) {
	ctx := context.Background()
	c, got := recorder(t, http.StatusAccepted, "")
	if err := c.Compact(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := c.Compact(ctx, "t", api.CompactRequest{MinFragments: 4, TargetRows: 1000, TargetBytes: 1 << 20, Force: true}); err != nil {
		t.Fatal(err)
	}
	want := []seen{
		{"POST", "/api/v1/tables/t/compact", "", ""},
		{"POST", "/api/v1/tables/t/compact", api.JSON, `{"min_fragments":4,"target_rows":1000,"target_bytes":1048576,"force":true}`},
	}
	if !slices.Equal(got(), want) {
		t.Errorf("Compact sent\n%+v\nwant\n%+v", got(), want)
	}
}

// PlanCompaction sends dry_run and returns the plan the server answers.
func TestPlanCompactionReturnsThePlan(t *testing.T) {
	c, got := recorder(t, http.StatusOK, `{"version":7,"bins":1,"fragments_before":3,"fragments_after":1,"plan":"bin 0: 3 fragments"}`)
	plan, err := c.PlanCompaction(context.Background(), "t", api.CompactRequest{MinFragments: 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := (api.CompactPlan{Version: 7, Bins: 1, FragmentsBefore: 3, FragmentsAfter: 1, Plan: "bin 0: 3 fragments"}); plan != want {
		t.Errorf("plan %+v, want %+v", plan, want)
	}
	if want := []seen{{"POST", "/api/v1/tables/t/compact", api.JSON, `{"min_fragments":2,"dry_run":true}`}}; !slices.Equal(got(), want) {
		t.Errorf("PlanCompaction sent %+v, want %+v", got(), want)
	}
}
