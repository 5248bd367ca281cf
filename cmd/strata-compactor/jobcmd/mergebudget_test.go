package jobcmd

import (
	"fmt"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
)

// --memory-budget bounds the Job's merges of the workers' flushed rows
// too: with 16 MiB, four shards' flush objects of about 5.5 MB each are
// merged in several commits of one pass, each logging a peak within the
// budget, and every row lands. Before, a merge held every flush object it
// read whatever the budget (555 MiB of peak RSS on a backlog of 1.6 GB).
func TestTheMemoryBudgetBoundsTheMerges(t *testing.T) {
	u := "file://" + t.TempDir() + "/events"
	b := smallTable(t, u, 1)
	mem := testenv.Allocator(t) // checked after the shards close
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	rows := m.Rows()
	for i := range 4 {
		s, err := walshard.Open(ctx, b, &walshard.Options{Shard: fmt.Sprintf("w%d", i), FlushInterval: time.Hour, ReuseBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		rec := rollouts.Batch(mem, 42, i, int64(i)*100_000, 5000)
		err = s.Append(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		rows += 5000
	}
	var flushed int64
	for o, err := range blob.List(ctx, b, format.FleetFlushDir, 0) {
		if err != nil {
			t.Fatal(err)
		}
		flushed += o.Size
	}
	if flushed < 16<<20 {
		t.Fatalf("%d bytes of flush objects, want more than the budget", flushed)
	}
	code, _, errOut := run([]string{"STRATA_MEMORY_BUDGET=16777216"}, "--once", "--no-gc", "--min-fragments", "100000", "--table", u)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var merged []float64
	for _, l := range logLines(t, errOut) {
		if l["msg"] != "merged" {
			continue
		}
		peak, _ := l["peak_memory"].(float64)
		if peak <= 0 || peak > 16<<20 {
			t.Fatalf("peak_memory %v, want within 16 MiB", l["peak_memory"])
		}
		merged = append(merged, l["rows"].(float64))
	}
	if len(merged) != 1 || merged[0] != 20000 {
		t.Fatalf("merges logged %v rows, want one line of 20000:\n%s", merged, errOut)
	}
	snap, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := snap.Manifest().Rows(); n != rows {
		t.Fatalf("%d rows in the table, want %d", n, rows)
	}
	if v := snap.Manifest().Version; v < 4 {
		t.Fatalf("four shards of 5.5 MB merged by version %d within 16 MiB: want several commits", v)
	}
}
