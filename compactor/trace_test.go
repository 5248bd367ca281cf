package compactor_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/internal/rollouts"
	"github.com/stratadb/strata/internal/testenv"
	"github.com/stratadb/strata/walshard"
)

var updateTraces = flag.Bool("update-traces", false, "rewrite the golden request traces under testdata/trace")

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
func (t *tracer) Unwrap() blob.Bucket { return t.Bucket }

// Names that differ from run to run: ULIDs, random suffixes, times.
var (
	ulidRE    = regexp.MustCompile(`[0-9A-HJKMNP-TV-Z]{26}`)
	hexRE     = regexp.MustCompile(`-[0-9a-f]{8,}\b`)
	historyRE = regexp.MustCompile(`(_compactor/history/|_gc/orphans/)\d{20}`)
)

// record runs fn with the trace on and compares what it asked of the store
// with testdata/trace/<name>.golden (rewritten with -update-traces).
func (t *tracer) record(tt *testing.T, name string, fn func() error) {
	tt.Helper()
	t.mu.Lock()
	t.on, t.lines = true, nil
	t.mu.Unlock()
	err := fn()
	t.mu.Lock()
	t.on = false
	lines := t.lines
	t.mu.Unlock()
	if err != nil {
		tt.Fatalf("%s: %v", name, err)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "# %s: %d requests\n", name, len(lines))
	for _, l := range lines {
		l = historyRE.ReplaceAllString(l, "${1}<time>")
		l = ulidRE.ReplaceAllString(l, "<id>")
		l = hexRE.ReplaceAllString(l, "-<rnd>")
		sb.WriteString(l + "\n")
	}
	path := filepath.Join("testdata", "trace", name+".golden")
	if *updateTraces {
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			tt.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tt.Fatalf("%v (run go test ./compactor -run TestGoldenTraces -update-traces)", err)
	}
	if string(want) != sb.String() {
		tt.Errorf("%s makes other requests than testdata/trace/%s.golden (review, then -update-traces):\ngot:\n%swant:\n%s", name, name, sb.String(), want)
	}
}

// The object-store requests of a commit, a shard merge, a compaction and a
// collection, in order, compared with files under testdata/trace: a change
// in what an operation costs shows in review.
func TestGoldenTraces(t *testing.T) {
	under, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	b := &tracer{Bucket: under}
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendOne := func(w, i int) error {
		rec := rollouts.Batch(testenv.Allocator(t), 42, w, int64(i*10), 10)
		defer rec.Release()
		_, err := tb.Append(ctx, rec)
		return err
	}
	for i := range 3 {
		if err := appendOne(0, i); err != nil {
			t.Fatal(err)
		}
	}
	b.record(t, "commit-append", func() error { return appendOne(0, 3) })

	s, err := walshard.Open(ctx, b, &walshard.Options{Shard: "w1", FlushInterval: time.Hour, MergeInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 0, 10)
	defer rec.Release()
	if err := s.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b.record(t, "shard-merge", func() error { _, err := s.Merge(ctx); return err })

	b.record(t, "compaction", func() error {
		_, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, &compactor.Options{Parallelism: 1, Holder: "trace"})
		return err
	})
	b.record(t, "gc", func() error {
		_, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1}, time.Now().Add(2*time.Hour))
		return err
	})
}
