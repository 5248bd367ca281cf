package blob_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stratadb/strata/blob"
)

// fakeS3 answers Open's access check with an empty listing, single
// deletes with 204, and a DeleteObjects with what batch returns.
func fakeS3(t *testing.T, batch func(w http.ResponseWriter, body string)) (blob.Bucket, func() (posts, deletes int)) {
	var mu sync.Mutex
	var posts, deletes int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodPost && r.URL.Query().Has("delete"):
			posts++
			batch(w, string(body))
		case r.Method == http.MethodDelete:
			deletes++
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Content-Type", "application/xml")
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><IsTruncated>false</IsTruncated></ListBucketResult>`))
		}
	}))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	b, err := blob.Open(context.Background(), "s3://b/t?region=us-east-1&use_path_style=true&endpoint="+srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, func() (int, int) { mu.Lock(); defer mu.Unlock(); return posts, deletes }
}

// An S3-compatible store without multi-object delete answers 501: the
// keys are deleted one a request, then and from then on.
func TestAStoreWithoutBatchedDeletesDeletesOneByOne(t *testing.T) {
	b, seen := fakeS3(t, func(w http.ResponseWriter, _ string) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusNotImplemented)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>A header you provided implies functionality that is not implemented</Message></Error>`))
	})
	keys := []string{"a", "b", "c"}
	if err := blob.DeleteAll(context.Background(), b, keys); err != nil {
		t.Fatalf("DeleteAll on a store without DeleteObjects: %v", err)
	}
	if posts, deletes := seen(); posts != 1 || deletes != 3 {
		t.Fatalf("%d DeleteObjects and %d single deletes, want 1 and 3", posts, deletes)
	}
	if err := blob.DeleteAll(context.Background(), b, keys); err != nil {
		t.Fatal(err)
	}
	if posts, deletes := seen(); posts != 1 || deletes != 6 {
		t.Fatalf("then %d DeleteObjects and %d single deletes, want no more DeleteObjects and 6", posts, deletes)
	}
}

// A key DeleteObjects could not delete is an error that names it; a key
// that was missing is none.
func TestABatchedDeleteNamesAKeyItCouldNotDelete(t *testing.T) {
	b, _ := fakeS3(t, func(w http.ResponseWriter, body string) {
		if !strings.Contains(body, "<Key>t/b</Key>") {
			t.Errorf("the request does not name the keys under the bucket's prefix: %s", body)
		}
		w.Header().Set("Content-Type", "application/xml")
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><DeleteResult>` +
			`<Error><Key>t/a</Key><Code>NoSuchKey</Code><Message>gone</Message></Error>` +
			`<Error><Key>t/b</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error></DeleteResult>`))
	})
	err := blob.DeleteAll(context.Background(), b, []string{"a", "b", "c"})
	var be *blob.Error
	if !errors.As(err, &be) || be.Key != "b" || !errors.Is(err, blob.ErrPermanent) || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("got %v, want a permanent error naming key b and AccessDenied", err)
	}
}
