package job_test

import (
	"context"
	"io"
	"os"
	"sync"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/internal/rollouts"
	"github.com/stratadb/strata/internal/testenv"
)

var ctx = context.Background()

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// rolloutsTable makes a table at u and appends n batches of rows rows
// from worker w, each a commit.
func rolloutsTable(t testing.TB, u string, w, n, rows int) blob.Bucket {
	t.Helper()
	b, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		rec := rollouts.Batch(testenv.Allocator(t), 42, w, int64(i*rows), rows)
		_, err := tb.Append(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// tracer records every object-store request while on, one line each.
type tracer struct {
	blob.Bucket
	mu    sync.Mutex
	on    bool
	lines []string
}

func (t *tracer) log(op, key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.on {
		t.lines = append(t.lines, op+" "+key)
	}
}

func (t *tracer) Get(ctx context.Context, key string) ([]byte, error) {
	t.log("GET", key)
	return t.Bucket.Get(ctx, key)
}
func (t *tracer) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	t.log("GET-RANGE", key)
	return t.Bucket.NewRangeReader(ctx, key, off, n)
}
func (t *tracer) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	t.log("PUT-IF-ABSENT", key)
	return t.Bucket.PutIfAbsent(ctx, key, data)
}
func (t *tracer) Put(ctx context.Context, key string, r io.Reader) error {
	t.log("PUT", key)
	return t.Bucket.Put(ctx, key, r)
}
func (t *tracer) Delete(ctx context.Context, key string) error {
	t.log("DELETE", key)
	return t.Bucket.Delete(ctx, key)
}
func (t *tracer) ListPage(ctx context.Context, prefix, token string, n int) (blob.Page, error) {
	t.log("LIST", prefix)
	return t.Bucket.ListPage(ctx, prefix, token, n)
}
func (t *tracer) ListDir(ctx context.Context, prefix, token string, n int) (blob.DirPage, error) {
	t.log("LIST-DIR", prefix)
	return t.Bucket.ListDir(ctx, prefix, token, n)
}
func (t *tracer) Attributes(ctx context.Context, key string) (blob.Attributes, error) {
	t.log("HEAD", key)
	return t.Bucket.Attributes(ctx, key)
}
