package blob

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

// A store that throttles (503 SlowDown) is met with backoff and more
// tries than the SDK's default three: a conditional create throttled three
// times in a row lands on the fourth try, once.
func TestS3ThrottlingIsMetWithBackoffAndMoreTries(t *testing.T) {
	var puts, created atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			w.Header().Set("Content-Type", "application/xml")
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><IsTruncated>false</IsTruncated></ListBucketResult>`))
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		if puts.Add(1) <= 3 {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`))
			return
		}
		created.Add(1)
		w.Header().Set("ETag", `"e"`)
	}))
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	b, err := Open(context.Background(), "s3://b/t?region=us-east-1&endpoint="+srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.PutIfAbsent(context.Background(), "k", []byte("x")); err != nil {
		t.Fatalf("a create throttled three times: %v", err)
	}
	if puts.Load() != 4 || created.Load() != 1 {
		t.Fatalf("%d tries, %d created; want 4 and 1", puts.Load(), created.Load())
	}
}

// S3 without a region, or without credentials, fails at Open with a
// permanent error (not a transient one, which a caller would retry) that
// names the cause and the remedy — and not another cloud's.
func TestS3SetUpMistakesNameTheRemedy(t *testing.T) {
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	for _, c := range []struct {
		what, url, region, key, want string
	}{
		{"no region", "s3://b/t", "", "x", "set AWS_REGION"},
		{"no credentials", "s3://b/t?region=us-east-1", "", "", "set AWS_ACCESS_KEY_ID"},
	} {
		t.Run(c.what, func(t *testing.T) {
			t.Setenv("AWS_REGION", c.region)
			t.Setenv("AWS_DEFAULT_REGION", c.region)
			t.Setenv("AWS_ACCESS_KEY_ID", c.key)
			t.Setenv("AWS_SECRET_ACCESS_KEY", c.key)
			_, err := Open(context.Background(), c.url)
			if err == nil || !errors.Is(err, ErrPermanent) || errors.Is(err, ErrRetryable) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "GOOGLE") {
				t.Fatalf("Open(%s) with %s: %v; want a permanent error saying %q", c.url, c.what, err, c.want)
			}
		})
	}
}
