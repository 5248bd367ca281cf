package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
)

// A server and the compactor Job given one environment follow one
// compaction policy: STRATA_QUIET_WINDOWS and STRATA_MIN_FRAGMENTS (the
// same flags, --quiet-windows and --min-fragments, in both binaries) decide
// when the server's stats say compaction is due, whether the server's
// POST …/compact runs one, and whether the Job's pass compacts.
func TestServeAndTheJobFollowOnePolicy(t *testing.T) {
	root := testenv.MinIO(t).URL(t)
	u := strings.Replace(root, "?", "/events?", 1)
	for w := range 4 {
		p := run(t, "strata", "worker", u, "--worker", fmt.Sprint(w), "--appends", "1", "--rows", "10", "--flush-interval", "1ms", "--merge-interval", "1ms")
		p.wait(t, time.Minute)
	}
	fragments := func() int {
		b, err := blob.Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		m, err := table.ReadLatest(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return len(m.Fragments)
	}
	before := fragments()
	if before < 4 {
		t.Fatalf("the table holds %d fragments, want 4 or more", before)
	}
	job := func() {
		t.Helper()
		p := run(t, "strata-compactor", "--once", "--table", u, "--no-gc")
		p.wait(t, time.Minute)
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("strata-compactor: exit %d\n%s", code, p.stderr())
		}
	}

	// Quiet all day, from the environment.
	t.Setenv("STRATA_QUIET_WINDOWS", "0-24")
	t.Setenv("STRATA_MIN_FRAGMENTS", "2")
	srv := run(t, "strata", "serve", "--bucket", root, "--listen", "127.0.0.1:0", "--instance", "policy")
	addr := serverAddr(t, srv)
	stats := compactStats(t, addr)
	if stats.Due || !strings.Contains(stats.DueReason, "quiet window 00-24") {
		t.Fatalf("in a quiet window the server says due %v: %q", stats.Due, stats.DueReason)
	}
	if code, body := post(t, addr+"/api/v1/tables/events/compact", ""); code != http.StatusConflict || !strings.Contains(body, api.CodeNotDue) {
		t.Fatalf("POST …/compact in a quiet window: %d %s", code, body)
	}
	job()
	if n := fragments(); n != before {
		t.Fatalf("the Job compacted in its quiet window: fragments %d -> %d", before, n)
	}
	srv.signal(syscall.SIGTERM)
	srv.wait(t, time.Minute)

	// No quiet window; a minimum above the table's fragments.
	os.Unsetenv("STRATA_QUIET_WINDOWS")
	t.Setenv("STRATA_MIN_FRAGMENTS", fmt.Sprint(before+1))
	srv = run(t, "strata", "serve", "--bucket", root, "--listen", "127.0.0.1:0", "--instance", "policy")
	addr = serverAddr(t, srv)
	stats = compactStats(t, addr)
	if stats.Due || !strings.Contains(stats.DueReason, fmt.Sprintf("below min %d", before+1)) {
		t.Fatalf("below the minimum the server says due %v: %q", stats.Due, stats.DueReason)
	}
	job()
	if n := fragments(); n != before {
		t.Fatalf("the Job compacted below its minimum: fragments %d -> %d", before, n)
	}

	// The minimum reached: both say due, and the Job compacts.
	t.Setenv("STRATA_MIN_FRAGMENTS", fmt.Sprint(before))
	srv.signal(syscall.SIGTERM)
	srv.wait(t, time.Minute)
	srv = run(t, "strata", "serve", "--bucket", root, "--listen", "127.0.0.1:0", "--instance", "policy")
	addr = serverAddr(t, srv)
	if stats = compactStats(t, addr); !stats.Due {
		t.Fatalf("at the minimum the server says not due: %q", stats.DueReason)
	}
	job()
	if n := fragments(); n != 1 {
		t.Fatalf("the Job did not compact at its minimum: fragments %d -> %d", before, n)
	}
	srv.signal(syscall.SIGTERM)
	srv.wait(t, time.Minute)
	t.Logf("the server and the Job agreed: quiet window, below the minimum (%d), at it (%d fragments -> 1)", before+1, before)
}

func compactStats(t *testing.T, addr string) api.CompactStats {
	t.Helper()
	resp, err := http.Get(addr + "/api/v1/tables/events/compact/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st api.CompactStats
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET …/compact/stats: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func post(t *testing.T, u, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(u, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}
