package job_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/trace"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/job"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/wal"
)

// Two workers died with rows in their WALs; the store lost an entry of the
// first. Its adoption fails, naming it, and shows in the status; the
// second is adopted all the same. Before, the first failure ended the
// pass: the second shard's rows stayed stranded, and the pass did nothing
// more (no compaction, no collection) until the damaged shard looked
// quiet again.
func TestADamagedShardDoesNotHoldUpTheOtherAdoptions(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 0, 0)
	for i, id := range []string{"a-damaged", "b-whole"} {
		s := shardWithRows(t, b, id, i, 2)
		s.Close() // dies: its rows are in its WAL only
	}
	if err := b.Delete(ctx, "_shards/a-damaged/wal/"+format.Inverted(2)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // quiet for longer than the adoption age
	o := jobOver(b)
	o.AdoptAfter = 20 * time.Millisecond
	sum, err := job.RunOnce(ctx, &o)
	if err == nil || !strings.Contains(err.Error(), `adopting shard "a-damaged"`) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("the pass: %v, want the damaged shard's adoption named", err)
	}
	if sum.Adopted != 1 || len(sum.Outcomes) != 1 || len(sum.Outcomes[0].Adopted) != 1 || sum.Outcomes[0].Adopted[0] != "b-whole" {
		t.Fatalf("adopted %+v, want b-whole", sum.Outcomes)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Manifest().Rows(); n != 20 {
		t.Fatalf("the table holds %d rows after the pass, want b-whole's 20", n)
	}
	st, err := compactor.ReadStatus(ctx, b, 1)
	if err != nil || !strings.Contains(st.Kinds[compactor.KindAdoption].LastError, "a-damaged") || st.LastError != "" || st.TotalAdopted != 1 {
		t.Fatalf("status: %+v %v, want the failure as the adoption's last_error (not the compaction's) and one adoption", st, err)
	}
}

// jobOver is a Job's options over bucket b alone, which its passes
// cannot close (the test reads it afterwards), logging nothing.
func jobOver(b blob.Bucket) job.Options {
	return job.Options{Tables: []string{"t"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Open: func(context.Context, string) (blob.Bucket, error) { return keepOpen{b}, nil }}
}

type keepOpen struct{ blob.Bucket }

func (keepOpen) Close() error { return nil }

// shardWithRows opens shard id on b and appends n batches of 10 rows of
// worker w, acknowledged and not flushed.
func shardWithRows(t *testing.T, b blob.Bucket, id string, w, n int) *walshard.Shard {
	t.Helper()
	s, err := walshard.Open(ctx, b, &walshard.Options{Shard: id})
	if err != nil {
		t.Fatal(err)
	}
	for j := range int64(n) {
		rec := rollouts.Batch(testenv.Allocator(t), 42, w, j*10, 10)
		err := s.Append(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// A dead shard adopted once is left alone: later passes, each past the
// adoption age, adopt nothing, claim no epoch, grow no lag, record no
// history, and cost the same requests, none of them the shard's. A new
// owner that writes to the shard and dies has it adopted again. Before,
// every pass past the age adopted it again (rows_replayed 0): its epoch
// climbed and its WAL lag grew by one a pass, and the history filled with
// adoptions.
func TestAnAdoptedShardIsLeftAloneByLaterPasses(t *testing.T) {
	counted, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer counted.Close()
	tr := trace.Wrap(counted)
	if _, err := commit.Create(ctx, tr, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	shardWithRows(t, tr, "dead", 1, 3).Close() // dies: its rows are in its WAL only
	o := jobOver(tr)
	o.AdoptAfter, o.NoGC = 20*time.Millisecond, true
	pass := func() job.Summary {
		t.Helper()
		time.Sleep(50 * time.Millisecond) // quiet for longer than the adoption age
		sum, err := job.RunOnce(ctx, &o)
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	type look struct {
		epoch, lag    uint64
		adopted       int64
		history, rows int64
	}
	looks := func() look {
		t.Helper()
		e, err := wal.NewestEpoch(ctx, counted, "dead")
		if err != nil {
			t.Fatal(err)
		}
		st, err := walshard.Inspect(ctx, counted, "dead")
		if err != nil {
			t.Fatal(err)
		}
		status, err := compactor.ReadStatus(ctx, counted, 1000)
		if err != nil {
			t.Fatal(err)
		}
		m, err := table.ReadLatest(ctx, counted)
		if err != nil {
			t.Fatal(err)
		}
		return look{e, st.WALLag, status.TotalAdopted, int64(len(status.History)), m.Rows()}
	}
	if sum := pass(); sum.Adopted != 1 {
		t.Fatalf("the first pass adopted %d shards, want the dead one", sum.Adopted)
	}
	adopted := looks()
	if adopted.lag != 0 || adopted.rows != 30 || adopted.adopted != 1 {
		t.Fatalf("after the adoption: %+v, want no lag, its 30 rows in the table, one adoption", adopted)
	}
	var costs []int64
	for i := range 4 {
		before, _ := blob.StatsOf(counted)
		var sum job.Summary
		lines, _ := tr.Record(func() error { sum = pass(); return nil })
		var touched []string
		lease := int64(0)
		for _, l := range lines {
			if strings.Contains(l, "/dead") {
				touched = append(touched, l)
			}
			if strings.Contains(l, " _compactor/lease/") {
				lease++
			}
		}
		after, _ := blob.StatsOf(counted)
		// The lease's upkeep aside (a pass takes it, releases it, and
		// deletes the leases of passes before the last two).
		costs = append(costs, after.Sub(before).Requests()-lease)
		if got := looks(); sum.Adopted != 0 || got != adopted || len(touched) > 0 {
			t.Fatalf("pass %d after the adoption: adopted %d; %+v, want %+v; requests to the shard %q", i+1, sum.Adopted, got, adopted, touched)
		}
	}
	t.Logf("requests of the passes after the adoption, the lease's aside: %v", costs)
	for _, c := range costs[1:] {
		if c != costs[0] {
			t.Fatalf("requests of the passes after the adoption, the lease's aside: %v, want the same each pass", costs)
		}
	}
	// A new owner writes, and dies: the shard is adopted again.
	shardWithRows(t, tr, "dead", 3, 1).Close()
	if sum := pass(); sum.Adopted != 1 {
		t.Fatalf("a new owner's rows: adopted %d shards, want the dead one", sum.Adopted)
	}
	if got := looks(); got.rows != 40 || got.lag != 0 || got.epoch != adopted.epoch+2 || got.adopted != 2 {
		t.Fatalf("after the second adoption: %+v, want 40 rows, no lag, two epochs more, two adoptions", got)
	}
}
