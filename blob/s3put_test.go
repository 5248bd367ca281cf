package blob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/harness/testenv"
)

// On S3, conditional creates go in one PutObject of their own, beside
// gocloud's writer for Put: objects of every size read back byte for byte
// under the URL's prefix whichever wrote them, and a conditional create of
// an existing key reports ErrExists.
func TestS3PutSizesMinIO(t *testing.T) {
	ctx := context.Background()
	b, err := blob.Open(ctx, testenv.MinIO(t).URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 1 << 20, 6 << 20} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		key := "sizes/" + strconv.Itoa(size)
		if err := b.Put(ctx, key, bytes.NewReader(data)); err != nil {
			t.Fatalf("put %d bytes: %v", size, err)
		}
		got, err := b.Get(ctx, key)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes read back as %d: %v", size, len(got), err)
		}
		if err := b.PutIfAbsent(ctx, key, []byte("x")); !errors.Is(err, blob.ErrExists) {
			t.Fatalf("conditional create over %d bytes: %v, want ErrExists", size, err)
		}
		created := "sizes/created-" + strconv.Itoa(size)
		if err := b.PutIfAbsent(ctx, created, data); err != nil {
			t.Fatalf("conditional create of %d bytes: %v", size, err)
		}
		if got, err := b.Get(ctx, created); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes created conditionally read back as %d: %v", size, len(got), err)
		}
	}
}

// The client's cost of uploading a fragment of 200 rows of the benchmark
// workload (239 KB) to S3, against a server that takes the body and
// answers 200 at once.
func BenchmarkS3PutFragment(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodGet { // Open's access check: an empty listing
			w.Header().Set("Content-Type", "application/xml")
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><IsTruncated>false</IsTruncated></ListBucketResult>`))
		}
	}))
	defer srv.Close()
	b.Setenv("AWS_ACCESS_KEY_ID", "k")
	b.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	bk, err := blob.Open(context.Background(), "s3://b/t?region=us-east-1&use_path_style=true&endpoint="+srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	data := make([]byte, 239_000)
	for i := range data[:120_000] {
		data[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		// Through a pipe, as a fragment writer streams it.
		pr, pw := io.Pipe()
		go func() {
			_, err := io.Copy(pw, bytes.NewReader(data))
			pw.CloseWithError(err)
		}()
		if err := bk.Put(context.Background(), "data/f.parquet", pr); err != nil {
			b.Fatal(err)
		}
	}
}
