package blob

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A store that takes requests and never answers them fails each request
// after read_timeout, retryably, instead of holding it for good. The
// store here answers the access check of Open, then goes silent.
func TestAnS3StoreThatStopsAnsweringFailsARequestInTime(t *testing.T) {
	var requests atomic.Int64
	silent := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 { // Open's access check: an empty listing
			w.Header().Set("Content-Type", "application/xml")
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><IsTruncated>false</IsTruncated></ListBucketResult>`))
			return
		}
		select {
		case <-silent:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(silent)
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	b, err := Open(context.Background(), "s3://b/t?region=us-east-1&read_timeout=200ms&endpoint="+srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	start := time.Now()
	_, err = b.Get(context.Background(), "k")
	if !errors.Is(err, ErrRetryable) {
		t.Fatalf("a GET the store never answers: %v, want ErrRetryable", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the GET failed after %v: the read timeout did not apply", d)
	}
	if _, err := Open(context.Background(), "s3://b/t?read_timeout=soon&endpoint="+srv.URL); !errors.Is(err, ErrBadURL) {
		t.Fatalf("read_timeout=soon: %v, want ErrBadURL", err)
	}
}
