package latencyproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// Every request waits the delay, and reaches the target with its Host
// header as the client sent it (what an S3 signature covers).
func TestRequestsWaitAndKeepTheirHost(t *testing.T) {
	var host string
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host = r.Host
		io.WriteString(w, "hello")
	}))
	defer target.Close()
	p, err := New(target.URL, 30*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()
	start := time.Now()
	resp, err := http.Get(front.URL + "/bucket/key")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
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
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(body)
	}))
	defer target.Close()
	p, err := New(target.URL, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.BytesPerSecond = 1_000_000 // 300 KB: 0.3 s
	front := httptest.NewServer(p)
	defer front.Close()
	start := time.Now()
	resp, err := http.Get(front.URL + "/bucket/key")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(got) != len(body) {
		t.Fatalf("read %d bytes of %d, %v", len(got), len(body), err)
	}
	if took := time.Since(start); took < 290*time.Millisecond {
		t.Fatalf("300 KB at 1 MB/s came in %v", took)
	}
}
