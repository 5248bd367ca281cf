package latencyproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Every request waits the delay, and reaches the target with its Host
// header as the client sent it (what an S3 signature covers).
func TestRequestsWaitAndKeepTheirHost(t *testing.T) {
	var host string
	p, front := proxied(t, 30*time.Millisecond, 0, func(w http.ResponseWriter, r *http.Request) {
		host = r.Host
		io.WriteString(w, "hello")
	})
	start := time.Now()
	body, err := get(front.URL + "/bucket/key")
	if err != nil || string(body) != "hello" {
		t.Fatalf("body %q, %v", body, err)
	}
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Fatalf("answered in %v, before the 30 ms delay", took)
	}
	if want := front.Listener.Addr().String(); host != want || p.Requests() != 1 {
		t.Fatalf("the target saw Host %q (want %q) after %d requests", host, want, p.Requests())
	}
}

// A paced response takes at least its size over the rate, and arrives
// whole.
func TestResponsesArePaced(t *testing.T) {
	body := make([]byte, 300_000)
	_, front := proxied(t, 0, 1_000_000, func(w http.ResponseWriter, r *http.Request) { w.Write(body) }) // 300 KB: 0.3 s
	start := time.Now()
	got, err := get(front.URL + "/bucket/key")
	if err != nil || len(got) != len(body) {
		t.Fatalf("read %d bytes of %d, %v", len(got), len(body), err)
	}
	if took := time.Since(start); took < 290*time.Millisecond {
		t.Fatalf("300 KB at 1 MB/s came in %v", took)
	}
}

// proxied starts a store that answers with handler and a Proxy in front
// of it, delaying each request delay and pacing each response at rate
// bytes a second (0: unpaced); both end with the test.
func proxied(t *testing.T, delay time.Duration, rate int64, handler http.HandlerFunc) (*Proxy, *httptest.Server) {
	t.Helper()
	target := httptest.NewServer(handler)
	t.Cleanup(target.Close)
	p, err := New(target.URL, delay, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.BytesPerSecond = rate
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	return p, front
}

// get returns the body of a GET of url.
func get(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// A lost response reached the target, which acted; the client gets no
// answer, only a closed connection. The others pass.
func TestLostResponsesReachTheTargetAndNeverTheClient(t *testing.T) {
	var served atomic.Int64
	p, front := proxied(t, 0, 0, func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.WriteString(w, "ok")
	})
	p.LoseResponses, p.Seed = 0.3, 7
	failed := 0
	const n = 200
	for range n {
		// A POST: the HTTP client sends a GET again by itself when a
		// kept-alive connection closes unanswered.
		resp, err := http.Post(front.URL+"/k", "text/plain", strings.NewReader("x"))
		var body []byte
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		switch {
		case err != nil:
			failed++
		case string(body) != "ok":
			t.Fatalf("a passed answer is %q", body)
		}
	}
	if served.Load() != n || int64(failed) != p.Lost() || failed < n/10 || failed > n/2 {
		t.Fatalf("target served %d of %d; %d failed, the proxy lost %d (want about 30%%)", served.Load(), n, failed, p.Lost())
	}
}

// Beyond its rate, a kind of request is answered 503 SlowDown without
// reaching the target; the other kind, within its own rate, passes.
func TestRequestsBeyondTheRateAreSlowedDown(t *testing.T) {
	var served atomic.Int64
	p, front := proxied(t, 0, 0, func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.WriteString(w, "ok")
	})
	p.WritesPerSecond, p.ReadsPerSecond = 10, 1000
	slowed, passed := 0, 0
	for range 50 { // at once: the bucket holds a second's worth, 10
		resp, err := http.Post(front.URL+"/k", "text/plain", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusServiceUnavailable:
			if !strings.Contains(string(body), "<Code>SlowDown</Code>") {
				t.Fatalf("a throttled answer says %q", body)
			}
			slowed++
		case http.StatusOK:
			passed++
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if passed < 10 || passed > 12 || int64(slowed) != p.Throttled() {
		t.Fatalf("%d writes passed (want 10 to 12: the bucket and what refilled), %d slowed down, the proxy counted %d", passed, slowed, p.Throttled())
	}
	for range 20 {
		if body, err := get(front.URL + "/k"); err != nil || string(body) != "ok" {
			t.Fatalf("a read within its rate: %q, %v", body, err)
		}
	}
	if served.Load() != int64(passed)+20 {
		t.Fatalf("the target served %d requests, want %d", served.Load(), passed+20)
	}
}
