package compactor

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/internal/rollouts"
	"github.com/stratadb/strata/internal/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

// A Job whose host clock runs two hours ahead of the store's keeps an
// upload on its way to a commit: it judges ages by the store's clock.
// Before, the fresh upload looked two hours old, older than the safety
// age, and was deleted; the commit then landed referencing it, and its
// acknowledged rows could not be read.
func TestAJobWhoseClockRunsAheadKeepsAFreshUpload(t *testing.T) {
	ctx := context.Background()
	b, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 5, 0, 7)
	defer rec.Release()
	frag, err := table.WriteFragment(ctx, b, rollouts.Schema, rec)
	if err != nil {
		t.Fatal(err)
	}
	// The pass runs while the writer is between its upload and its commit.
	o := JobOptions{Tables: []string{"file://t"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:  func() time.Time { return time.Now().Add(2 * time.Hour) },
		Open: func(ctx context.Context, u string) (blob.Bucket, error) { return keepOpen{b}, nil }}
	if _, err := RunOnce(ctx, &o); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Attributes(ctx, frag.Key); err != nil {
		t.Fatalf("the fresh upload after a pass two hours ahead: %v", err)
	}
	if _, err := commit.Commit(ctx, b, nil, table.Transaction{Kind: table.KindAppend, Added: []table.Fragment{frag}}, nil); err != nil {
		t.Fatal(err)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range s.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatalf("scan after the commit: %v", err)
		}
	}
}

// Nor does it take a live shard for an abandoned one: quiet since when is
// judged by the store's clock. Before, a Job an hour ahead adopted a shard
// its owner had written to a moment ago, fencing the owner.
func TestAJobWhoseClockRunsAheadLeavesALiveShardAlone(t *testing.T) {
	ctx := context.Background()
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	s, err := walshard.Open(ctx, b, &walshard.Options{Shard: "live"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 0, 10)
	defer rec.Release()
	if err := s.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	o := JobOptions{Tables: []string{"mem://t"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:  func() time.Time { return time.Now().Add(time.Hour) },
		Open: func(ctx context.Context, u string) (blob.Bucket, error) { return keepOpen{b}, nil }}
	sum, err := RunOnce(ctx, &o)
	if err != nil || sum.Adopted != 0 {
		t.Fatalf("a pass an hour ahead: adopted %d, %v; want the live shard left alone", sum.Adopted, err)
	}
	if err := s.Append(ctx, rec); err != nil {
		t.Fatalf("the owner's next append: %v", err)
	}
}
