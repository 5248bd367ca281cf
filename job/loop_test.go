package job_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/job"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
)

// stallingBucket holds every read of a fragment under data/ until release
// is closed, telling stalled once one is held.
type stallingBucket struct {
	blob.Bucket
	stalled chan struct{}
	once    sync.Once
	release chan struct{}
}

func (s *stallingBucket) hold(ctx context.Context, key string) error {
	if !strings.HasPrefix(key, format.DataDir) {
		return nil
	}
	s.once.Do(func() { close(s.stalled) })
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *stallingBucket) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.hold(ctx, key); err != nil {
		return nil, err
	}
	return s.Bucket.Get(ctx, key)
}

func (s *stallingBucket) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if err := s.hold(ctx, key); err != nil {
		return nil, err
	}
	return s.Bucket.NewRangeReader(ctx, key, off, n)
}

func (s *stallingBucket) Close() error { return nil }

// In interval mode a fleet's flushed generations are merged every
// interval even while a compaction is stuck on a slow store: the merge
// does not wait for the pass.
func TestIntervalFleetMergesDoNotWaitForCompaction(t *testing.T) {
	b := rolloutsTable(t, "mem://", 1, 4, 10)
	sb := &stallingBucket{Bucket: b, stalled: make(chan struct{}), release: make(chan struct{})}
	o := job.Options{Tables: []string{"mem://t"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), NoGC: true,
		Policy: engine.Policy{MinFragments: 2},
		Open:   func(ctx context.Context, u string) (blob.Bucket, error) { return sb, nil }}
	loopFor(t, &o)
	select {
	case <-sb.stalled:
	case <-time.After(10 * time.Second):
		t.Fatal("the Job never started compacting")
	}
	flushTenRows(t, b)
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := table.ReadLatest(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if m.Shards["w1"].Watermark > 0 {
			if got := m.Rows(); got != 50 {
				t.Fatalf("the table holds %d rows after the merge, want 50", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no fleet merge while the compaction was held")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(sb.release)
}

// Of a split compaction's parts, only part 0 merges the shards'
// generations (and adopts and collects); part 1 compacts its bins alone.
func TestOnlyPartZeroMerges(t *testing.T) {
	b := rolloutsTable(t, "mem://", 1, 40, 10)
	flushTenRows(t, b)
	run := func(part int) job.Summary {
		o := job.Options{Tables: []string{"mem://t"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Policy: engine.Policy{MinFragments: 2, TargetRows: 100, Part: compactor.Part{Index: part, Of: 2}},
			Open:   func(ctx context.Context, u string) (blob.Bucket, error) { return nopClose{b}, nil }}
		sum, err := job.RunOnce(ctx, &o)
		if err != nil {
			t.Fatalf("part %d: %v", part, err)
		}
		return sum
	}
	if sum := run(1); sum.Merged != 0 || sum.Compacted != 1 {
		t.Fatalf("part 1 of 2: merged %d generations, compacted %d tables; want none and its bins", sum.Merged, sum.Compacted)
	}
	if m, err := table.ReadLatest(ctx, b); err != nil || m.Shards["w1"].Watermark != 0 {
		t.Fatalf("after part 1 the shard's watermark is %d (%v): part 1 merged", m.Shards["w1"].Watermark, err)
	}
	if sum := run(0); sum.Merged != 1 || sum.Compacted != 1 {
		t.Fatalf("part 0 of 2: merged %d generations, compacted %d tables; want 1 and its bins", sum.Merged, sum.Compacted)
	}
	m, err := table.ReadLatest(ctx, b)
	if err != nil || m.Rows() != 410 || len(compactor.PlanCompaction(m, engine.Policy{TargetRows: 100}).Bins) != 0 {
		t.Fatalf("after both parts: %d rows (want 410), %v", m.Rows(), err)
	}
}

// nopClose is a bucket the Job may close and the test reads on.
type nopClose struct{ blob.Bucket }

func (nopClose) Close() error { return nil }

// In interval mode a backlog larger than one run (MaxSourceFragments) is
// compacted pass after pass with nothing else committing: a pass that
// compacted does not take its own commit for a table where nothing
// happened.
func TestIntervalPassesWorkThroughABacklog(t *testing.T) {
	b := rolloutsTable(t, "mem://", 1, 60, 10)
	o := job.Options{Tables: []string{"mem://t"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), NoGC: true,
		Policy: engine.Policy{MinFragments: 2, TargetRows: 100, MaxSourceFragments: 10},
		Open:   func(ctx context.Context, u string) (blob.Bucket, error) { return nopClose{b}, nil }}
	loopFor(t, &o)
	testenv.Eventually(t, 10*time.Second, "the backlog compacted", func() bool {
		m, err := table.ReadLatest(ctx, b)
		return err == nil && len(compactor.PlanCompaction(m, o.Policy).Bins) == 0
	})
	if m, err := table.ReadLatest(ctx, b); err != nil || m.Rows() != 600 || len(m.Fragments) != 6 {
		t.Fatalf("after the backlog: %d rows in %d fragments, %v", m.Rows(), len(m.Fragments), err)
	}
}

// flushTenRows appends ten rows through shard w1 of the table in b and
// flushes them: a generation awaits a merge (the shard closes with the
// test).
func flushTenRows(t *testing.T, b blob.Bucket) {
	t.Helper()
	s, err := walshard.Open(ctx, b, &walshard.Options{Shard: "w1", FlushInterval: time.Hour, MergeInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rec := rollouts.Batch(testenv.Allocator(t), 42, 2, 1000, 10)
	defer rec.Release()
	if err := s.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// loopFor runs the Job in interval mode (every 20 ms) until the test
// ends.
func loopFor(t *testing.T, o *job.Options) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- job.Loop(ctx, o, 20*time.Millisecond) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}
