package gcs

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
)

// fakeGCS answers the first listing, blob.Open's access check, as GCS's JSON
// API does (an empty bucket), and hands every other request to rest.
func fakeGCS(t *testing.T, rest http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	var others atomic.Int64
	var checked atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/storage/v1/b/b/o") && !checked.Swap(true) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"storage#objects"}`))
			return
		}
		others.Add(1)
		rest(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL, "http://"))
	return srv, &others
}

// within runs op and fails the test if it has not returned after d: a
// request that hangs must fail this test, not the whole suite.
func within(t *testing.T, d time.Duration, what string, op func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s had not returned after %v", what, d)
		return nil
	}
}

// A GCS store that answers 503 to everything makes a request fail,
// retryably, after Attempts tries — not retry for as long as the
// caller's context lives, which for a writer is for good.
func TestAGCSStoreThatFailsEveryRequestFailsItInTime(t *testing.T) {
	_, others := fakeGCS(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":503,"message":"backend unavailable"}}`))
	})
	b, err := blob.Open(context.Background(), "gs://b/t")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = within(t, 60*time.Second, "a create the store answers 503", func() error {
		return b.PutIfAbsent(context.Background(), "k", []byte("v"))
	})
	if !errors.Is(err, blob.ErrRetryable) {
		t.Fatalf("a create answered 503: %v, want blob.ErrRetryable", err)
	}
	if n := others.Load(); n != Attempts {
		t.Fatalf("the store saw %d requests, want %d (Attempts)", n, Attempts)
	}
	for name, op := range map[string]func() error{
		"an upload": func() error { return b.Put(context.Background(), "k", strings.NewReader("v")) },
		"a read":    func() error { _, err := b.Get(context.Background(), "k"); return err },
		"a listing": func() error { _, err := b.ListPage(context.Background(), "", "", 10); return err },
	} {
		err := within(t, 60*time.Second, name+" the store answers 503", op)
		if !errors.Is(err, blob.ErrRetryable) {
			t.Fatalf("%s answered 503: %v, want blob.ErrRetryable", name, err)
		}
	}
}

// A GCS store that takes requests and never answers them fails each
// request after read_timeout, retryably.
func TestAGCSStoreThatStopsAnsweringFailsARequestInTime(t *testing.T) {
	silent := make(chan struct{})
	fakeGCS(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-silent:
		case <-r.Context().Done():
		}
	})
	defer close(silent)
	b, err := blob.Open(context.Background(), "gs://b/t?read_timeout=200ms")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = within(t, 60*time.Second, "a GET the store never answers", func() error {
		_, err := b.Get(context.Background(), "k")
		return err
	})
	if !errors.Is(err, blob.ErrRetryable) {
		t.Fatalf("a GET the store never answers: %v, want blob.ErrRetryable", err)
	}
	if _, err := blob.Open(context.Background(), "gs://b/t?read_timeout=soon"); !errors.Is(err, blob.ErrBadURL) {
		t.Fatalf("read_timeout=soon: %v, want blob.ErrBadURL", err)
	}
}

// Without credentials, blob.Open fails at once with a permanent error that says
// so, not with a bad URL or at the first request.
func TestOpenGCSWithoutCredentialsIsPermanent(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", t.TempDir()+"/missing.json")
	_, err := blob.Open(context.Background(), "gs://b/t")
	if !errors.Is(err, blob.ErrPermanent) || errors.Is(err, blob.ErrBadURL) || !strings.Contains(err.Error(), "no credentials for GCS") {
		t.Fatalf("gs:// without credentials: %v, want blob.ErrPermanent saying there are no credentials", err)
	}
}

// A program that replaced http.DefaultTransport (with tracing, say) opens
// a GCS bucket all the same: the opener asserted it was an *http.Transport
// and panicked.
func TestOpenGCSWithAReplacedDefaultTransport(t *testing.T) {
	fakeGCS(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	saved := http.DefaultTransport
	http.DefaultTransport = wrappedTransport{saved}
	t.Cleanup(func() { http.DefaultTransport = saved })
	b, err := blob.Open(context.Background(), "gs://b/t?read_timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Get(context.Background(), "k"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("a GET of a missing object: %v, want blob.ErrNotFound", err)
	}
}

type wrappedTransport struct{ http.RoundTripper }
