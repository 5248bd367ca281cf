package compactor_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/internal/rollouts"
	"github.com/stratadb/strata/internal/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
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
	if err := b.Delete(ctx, "_shards/a-damaged/wal/"+table.Inverted(2)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // quiet for longer than the adoption age
	o := jobOver(b)
	o.AdoptAfter = 20 * time.Millisecond
	sum, err := compactor.RunOnce(ctx, &o)
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
	if err != nil || !strings.Contains(st.LastError, "a-damaged") || st.TotalAdopted != 1 {
		t.Fatalf("status: %+v %v, want the failure as last_error and one adoption", st, err)
	}
}

// jobOver is a Job's options over bucket b alone, which its passes
// cannot close (the test reads it afterwards), logging nothing.
func jobOver(b blob.Bucket) compactor.JobOptions {
	return compactor.JobOptions{Tables: []string{"t"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
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
