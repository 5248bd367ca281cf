package job

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/walshard"
)

// A pass of the Job in interval mode over a table where nothing happened
// since the last pass makes two requests; a shard whose owner is idle
// makes none.
func TestIdleCostsNothing(t *testing.T) {
	ctx := context.Background()
	var b blob.Bucket
	o := Options{Tables: []string{"mem://t"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Open: func(ctx context.Context, u string) (blob.Bucket, error) { return b, nil }}
	var err error
	if b, err = blob.Open(ctx, "mem://"); err != nil {
		t.Fatal(err)
	}
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	s, err := walshard.Open(ctx, b, &walshard.Options{Shard: "w1", FlushInterval: 10 * time.Millisecond, MergeInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 0, 10)
	defer rec.Release()
	if err := s.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	j := newRunner(*o.EnsureDefaults(), true)
	defer j.close()
	if _, err := j.pass(ctx); err != nil {
		t.Fatal(err)
	}
	// The shard's loops tick every 10 ms: as a minute of production
	// intervals (flush 5 s, merge 10 s) would, and more.
	before, _ := blob.StatsOf(b)
	time.Sleep(500 * time.Millisecond)
	after, _ := blob.StatsOf(b)
	if n := after.Sub(before).Requests(); n != 0 {
		t.Fatalf("an idle shard made %d requests in 50 ticks of its loops", n)
	}
	for range 5 {
		sum, err := j.pass(ctx)
		if err != nil || sum.Idle != 1 {
			t.Fatalf("pass: %+v %v", sum, err)
		}
	}
	again, _ := blob.StatsOf(b)
	// A pass over an idle table: a LIST of its versions and one of flush
	// objects (announcements of older builds, found none, are looked for
	// again a minute later).
	if n := again.Sub(after).Requests(); n != 10 {
		t.Fatalf("5 passes over an idle table made %d requests, want 10", n)
	}
	// Something new: the next pass does its work (the owner's own loop
	// may merge the generation first).
	more := rollouts.Batch(testenv.Allocator(t), 42, 1, 10, 10)
	defer more.Release()
	if err := s.Append(ctx, more); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sum, err := j.pass(ctx)
	if err != nil || sum.Idle != 0 {
		t.Fatalf("pass after a flush: %+v %v", sum, err)
	}
}
