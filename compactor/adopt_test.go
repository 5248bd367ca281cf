package compactor

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
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
	ctx := context.Background()
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"a-damaged", "b-whole"} {
		s, err := walshard.Open(ctx, b, &walshard.Options{Shard: id})
		if err != nil {
			t.Fatal(err)
		}
		for j := range int64(2) {
			rec := rollouts.Batch(testenv.Allocator(t), 42, i, j*10, 10)
			err := s.Append(ctx, rec)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
		}
		s.Close() // dies: its rows are in its WAL only
	}
	if err := b.Delete(ctx, "_shards/a-damaged/wal/"+table.Inverted(2)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // quiet for longer than the adoption age
	o := JobOptions{Tables: []string{"mem://t"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), AdoptAfter: 20 * time.Millisecond,
		Open: func(ctx context.Context, u string) (blob.Bucket, error) { return keepOpen{b}, nil }}
	sum, err := RunOnce(ctx, &o)
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
	st, err := ReadStatus(ctx, b, 1)
	if err != nil || !strings.Contains(st.LastError, "a-damaged") || st.TotalAdopted != 1 {
		t.Fatalf("status: %+v %v, want the failure as last_error and one adoption", st, err)
	}
}

// keepOpen is a bucket the pass cannot close, so that the test reads it
// afterwards.
type keepOpen struct{ blob.Bucket }

func (keepOpen) Close() error { return nil }
