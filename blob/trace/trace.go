// Package trace wraps a blob.Bucket to record the requests made through
// it, one line each ("GET key", "LIST prefix", …), for golden tests: a
// test records what an operation asks of the store and compares it with a
// file under its package's testdata, so that a change in what the
// operation costs shows in review.
//
// A line is the operation and its key (a prefix for a listing):
//
//	GET, GET-RANGE, HEAD, PUT, PUT-IF-ABSENT, DELETE, LIST, LIST-DIR
//
// and DELETE-BATCH with every key of the batch.
//
// Text writes the lines with the parts of Strata's object names that
// differ from run to run (ULIDs, random suffixes, the times in history
// and orphan records' names) replaced by <id>, -<rnd> and <time>.
package trace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stratadb/strata/blob"
)

// Bucket records the requests made through it while recording is on.
type Bucket struct {
	blob.Bucket
	mu    sync.Mutex
	on    bool
	lines []string
}

var _ blob.Bucket = (*Bucket)(nil)

// Wrap returns b with a recorder, not recording.
func Wrap(b blob.Bucket) *Bucket { return &Bucket{Bucket: b} }

// Unwrap returns the bucket underneath (see blob.StatsOf).
func (t *Bucket) Unwrap() blob.Bucket { return t.Bucket }

// Record runs fn with recording on and returns the requests it made, in
// order, and fn's error.
func (t *Bucket) Record(fn func() error) ([]string, error) {
	t.mu.Lock()
	t.on, t.lines = true, nil
	t.mu.Unlock()
	err := fn()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.on = false
	return t.lines, err
}

func (t *Bucket) log(op, key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.on {
		t.lines = append(t.lines, op+" "+key)
	}
}

func (t *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	t.log("GET", key)
	return t.Bucket.Get(ctx, key)
}

func (t *Bucket) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	t.log("GET-RANGE", key)
	return t.Bucket.NewRangeReader(ctx, key, off, n)
}

func (t *Bucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	t.log("PUT-IF-ABSENT", key)
	return t.Bucket.PutIfAbsent(ctx, key, data)
}

func (t *Bucket) Put(ctx context.Context, key string, r io.Reader) error {
	t.log("PUT", key)
	return t.Bucket.Put(ctx, key, r)
}

func (t *Bucket) Delete(ctx context.Context, key string) error {
	t.log("DELETE", key)
	return t.Bucket.Delete(ctx, key)
}

// DeleteBatch passes a batch through when the bucket underneath takes
// one (see blob.BatchDeleter).
func (t *Bucket) DeleteBatch(ctx context.Context, keys []string) error {
	d, ok := t.Bucket.(blob.BatchDeleter)
	if !ok {
		return errors.ErrUnsupported
	}
	if len(keys) > 0 {
		t.log("DELETE-BATCH", strings.Join(keys, " "))
	}
	return d.DeleteBatch(ctx, keys)
}

func (t *Bucket) ListPage(ctx context.Context, prefix, token string, n int) (blob.Page, error) {
	t.log("LIST", prefix)
	return t.Bucket.ListPage(ctx, prefix, token, n)
}

func (t *Bucket) ListDir(ctx context.Context, prefix, token string, n int) (blob.DirPage, error) {
	t.log("LIST-DIR", prefix)
	return t.Bucket.ListDir(ctx, prefix, token, n)
}

func (t *Bucket) Attributes(ctx context.Context, key string) (blob.Attributes, error) {
	t.log("HEAD", key)
	return t.Bucket.Attributes(ctx, key)
}

// Names that differ from run to run: ULIDs, random suffixes, times.
var (
	ulidRE    = regexp.MustCompile(`[0-9A-HJKMNP-TV-Z]{26}`)
	hexRE     = regexp.MustCompile(`-[0-9a-f]{8,}\b`)
	historyRE = regexp.MustCompile(`(_compactor/history/|_gc/orphans/)\d{20}`)
)

// Text is the golden form of the requests lines named name: a header
// "# name: N requests", then one line each, with the parts of names that
// differ from run to run replaced.
func Text(name string, lines []string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# %s: %d requests\n", name, len(lines))
	for _, l := range lines {
		l = historyRE.ReplaceAllString(l, "${1}<time>")
		l = ulidRE.ReplaceAllString(l, "<id>")
		l = hexRE.ReplaceAllString(l, "-<rnd>")
		sb.WriteString(l + "\n")
	}
	return sb.String()
}

// Golden compares got with the file at path, or writes it there when
// update is set; a difference fails t, showing both. how names the
// command that writes the file anew.
func Golden(t testing.TB, path, got string, update bool, how string) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with %s)", err, how)
	}
	if string(want) != got {
		t.Errorf("the requests differ from %s (review, then %s):\ngot:\n%swant:\n%s", path, how, got, want)
	}
}
