package server_test

import (
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stratadb/strata/client"
)

// A client behind a front that sends each request to the other of two
// replicas reads its own append at once, from either: the replica that
// holds it serves it from its shard, the other with a fresh read of the
// fleet, and both plainly once the merge installed it. Describe's rows
// count it too. Before, a plain scan showed nothing until the next merge.
func TestAClientReadsItsOwnAppendsFromEitherReplica(t *testing.T) {
	a, b := replicas(t)
	var n atomic.Int64
	backends := []*url.URL{mustURL(t, a.http.URL), mustURL(t, b.http.URL)}
	front := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(backends[n.Add(1)%2])
	}})
	defer front.Close()
	c, err := client.New(front.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppendJSONLines(ctx, "t", []byte(row(1, "x")+row(2, "y"))); err != nil {
		t.Fatal(err)
	}
	scan := func(c *client.Client) int {
		t.Helper()
		recs, err := c.Scan(ctx, "t", client.ScanOptions{Columns: []string{"id"}})
		if err != nil {
			t.Fatal(err)
		}
		return len(ids(t, recs))
	}
	for range 2 { // once through each replica
		if got := scan(c); got != 2 {
			t.Fatalf("the client's scan right after its append: %d rows, want 2", got)
		}
	}
	if info, err := c.Describe(ctx, "t"); err != nil || info.Rows != 2 {
		t.Fatalf("describe right after the append: %d rows, %v; want 2", info.Rows, err)
	}
	plain, err := client.New(a.http.URL, &client.Options{IgnoreOwnWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := scan(plain); got != 0 {
		t.Fatalf("a scan that ignores own writes before the merge: %d rows, want 0", got)
	}
	for _, f := range []*fixture{a, b} {
		if err := f.c.CheckpointLSM(ctx, "t"); err != nil {
			t.Fatal(err)
		}
	}
	if got := scan(c); got != 2 {
		t.Fatalf("the client's scan after the merge: %d rows, want 2", got)
	}
	for _, f := range []*fixture{a, b} {
		t.Logf("%s", ownWriteReads(t, f))
	}
	if got := ownWriteReads(t, a) + " / " + ownWriteReads(t, b); !strings.Contains(got, `how="own_shard"`) ||
		!strings.Contains(got, `how="fleet"`) || !strings.Contains(got, `how="merged"`) {
		t.Fatalf("reads served: %s; want one from the shard, one from the fleet and one merged", got)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// ownWriteReads is a server's strata_own_write_reads_total lines.
func ownWriteReads(t *testing.T, f *fixture) string {
	t.Helper()
	_, data := raw(t, f, "GET", "/metrics", "", "", "")
	return strings.Join(regexp.MustCompile(`(?m)^strata_own_write_reads_total\{.*$`).FindAllString(data, -1), " ")
}
