package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// On SIGTERM, a client that trickles its body cannot hold the server: the
// requests in flight get a grace period, then their connections close,
// and the rows the server acknowledged are flushed and merged into the
// table before it exits 0.
func TestServeDrainsDespiteASlowClient(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	srv := run(t, "strata", "serve", "--bucket", "file://"+dir, "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--shutdown-grace", "1s", "--flush-interval", "1h", "--merge-interval", "1h")
	base := fmt.Sprintf("http://127.0.0.1:%d/api/v1/tables/events", port)
	waitUp(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
	do := func(method, u, ctype, body string) (int, string) {
		req, err := http.NewRequest(method, u, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", ctype)
		resp, err := http.DefaultClient.Do(req)
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
	if code, msg := do("PUT", base, "application/json", `{"fields":[{"name":"id","type":"int64"}]}`); code != 201 {
		t.Fatalf("create: %d %s", code, msg)
	}
	var lines strings.Builder
	for i := range 100 {
		fmt.Fprintf(&lines, "{\"id\": %d}\n", i)
	}
	if code, msg := do("POST", base+"/rows", "application/x-ndjson", lines.String()); code != 200 {
		t.Fatalf("append: %d %s", code, msg)
	}
	// A client that sends headers and one byte of a large body.
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/tables/events/rows HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: 1000000\r\n\r\n{")
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	srv.signal(syscall.SIGTERM)
	srv.wait(t, 30*time.Second)
	if code := srv.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("serve exited %d after %v\n%s", code, time.Since(start), srv.stderr())
	}
	t.Logf("serve drained and exited 0 in %v with a slow client connected", time.Since(start).Round(time.Millisecond))
	want := make([]int64, 100)
	for i := range want {
		want[i] = int64(i)
	}
	if n := checkOnce(t, "file://"+dir+"/events", want); n != 100 {
		t.Fatalf("the table holds %d rows after the drain, want 100", n)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func waitUp(t *testing.T, u string) {
	t.Helper()
	waitUpWith(t, http.DefaultClient, u)
}

// waitUpWith waits until u answers hc.
func waitUpWith(t *testing.T, hc *http.Client, u string) {
	t.Helper()
	for range 200 {
		if resp, err := hc.Get(u); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("%s never answered", u)
}
