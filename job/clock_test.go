package job_test

import (
	"testing"
	"time"

	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/job"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// A Job whose host clock runs two hours ahead of the store's keeps an
// upload on its way to a commit: it judges ages by the store's clock.
// Before, the fresh upload looked two hours old, older than the safety
// age, and was deleted; the commit then landed referencing it, and its
// acknowledged rows could not be read.
func TestAJobWhoseClockRunsAheadKeepsAFreshUpload(t *testing.T) {
	b := rolloutsTable(t, "file://"+t.TempDir(), 0, 0, 0)
	defer b.Close()
	rec := rollouts.Batch(testenv.Allocator(t), 42, 5, 0, 7)
	defer rec.Release()
	frag, err := fragment.Write(ctx, b, rollouts.Schema, rec)
	if err != nil {
		t.Fatal(err)
	}
	// The pass runs while the writer is between its upload and its commit.
	o := jobOver(b)
	o.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, err := job.RunOnce(ctx, &o); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Attributes(ctx, frag.Key); err != nil {
		t.Fatalf("the fresh upload after a pass two hours ahead: %v", err)
	}
	if _, err := commit.Commit(ctx, b, nil, format.Transaction{Kind: format.KindAppend, Added: []format.Fragment{frag}}, nil); err != nil {
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
	b := rolloutsTable(t, "mem://", 0, 0, 0)
	s := shardWithRows(t, b, "live", 1, 1)
	defer s.Close()
	o := jobOver(b)
	o.Now = func() time.Time { return time.Now().Add(time.Hour) }
	sum, err := job.RunOnce(ctx, &o)
	if err != nil || sum.Adopted != 0 {
		t.Fatalf("a pass an hour ahead: adopted %d, %v; want the live shard left alone", sum.Adopted, err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 10, 10)
	defer rec.Release()
	if err := s.Append(ctx, rec); err != nil {
		t.Fatalf("the owner's next append: %v", err)
	}
}
