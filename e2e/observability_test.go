package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/harness/testenv"
)

// scrapeNames reads the metric family names a /metrics answer exposes.
func scrapeNames(t *testing.T, u string) map[string]bool {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllStringSubmatch(string(data), -1) {
		names[m[1]] = true
	}
	return names
}

// Every metric the Grafana dashboard and the alert rules under deploy/
// query is one the server or the compactor Job exposes, once they have
// done their work: an append, a flush, a fleet merge, a compaction.
func TestDashboardAndAlertsNameRealMetrics(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var queried []string
	for _, f := range []string{"deploy/grafana-dashboard.json", "deploy/prometheus-rules.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".json") && !json.Valid(data) {
			t.Fatalf("%s is not JSON", f)
		}
		for _, m := range regexp.MustCompile(`\b(strata_[a-z0-9_]+)`).FindAllStringSubmatch(string(data), -1) {
			name := m[1]
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if strings.HasSuffix(name, "_seconds"+suffix) {
					name = strings.TrimSuffix(name, suffix)
				}
			}
			if !slices.Contains(queried, name) {
				queried = append(queried, name)
			}
		}
	}
	if len(queried) < 10 {
		t.Fatalf("found only %v in the dashboard and rules", queried)
	}

	dir := t.TempDir()
	port := freePort(t)
	srv := run(t, "strata", "serve", "--bucket", "file://"+dir, "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--flush-interval", "1h", "--merge-interval", "1h")
	defer srv.signal(syscall.SIGTERM)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitUp(t, base+"/healthz")
	do := func(method, path, ctype, body string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
		}
	}
	do("PUT", "/api/v1/tables/events", "application/json", `{"fields":[{"name":"id","type":"int64"}]}`)
	for i := range 3 {
		do("POST", "/api/v1/tables/events/rows", "application/x-ndjson", fmt.Sprintf("{\"id\": %d}\n", i))
	}
	do("POST", "/api/v1/tables/events/lsm/flush", "", "")
	time.Sleep(200 * time.Millisecond) // the flush runs in the background; the Job below merges what it made
	mport := freePort(t)
	job := run(t, "strata-compactor", "--interval", "200ms", "--tables-under", "file://"+dir, "--min-fragments", "1",
		"--metrics-listen", fmt.Sprintf("127.0.0.1:%d", mport))
	defer job.signal(syscall.SIGTERM)
	do("POST", "/api/v1/tables/events/compact", "", "")

	deadline := time.Now().Add(30 * time.Second)
	for {
		exposed := scrapeNames(t, base+"/metrics")
		jobURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", mport)
		if resp, err := http.Get(jobURL); err == nil {
			resp.Body.Close()
			for n := range scrapeNames(t, jobURL) {
				exposed[n] = true
			}
		}
		var missing []string
		for _, n := range queried {
			if !exposed[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dashboard or the alerts query metrics no binary exposes: %v\nserver log:\n%s\njob log:\n%s", missing, srv.stderr(), job.stderr())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
