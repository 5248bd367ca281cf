package compactor_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table/evolve"
)

const compactChild = "compactor-compact-once"

func init() {
	testenv.RegisterChild(compactChild, func() int {
		b, err := blob.Open(context.Background(), testenv.ChildArgs()[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		opts := &compactor.Options{Recode: testenv.ChildArgs()[1] == "recode"}
		res, err := compactor.Compact(context.Background(), b, &compactor.Policy{MaxSourceFragments: 4096, MaxSourceBytes: 4 << 30}, opts)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("%d -> %d fragments, %d rows, %d bytes rewritten, %d bins copied, %d sorted (%d runs spilled), %d bytes held at most\n",
			res.FragmentsBefore, res.FragmentsAfter, res.RowsAfter, res.BytesRewritten, res.BinsCopied, res.BinsSorted, res.Spills, res.PeakMemory)
		return 0
	})
}

// BenchmarkCompactionMemory compacts a table of 2,000 fragments of 200
// rollout rows (935 MB logical) in a process of its own and reports that
// process's peak RSS: memory is bounded by a few batches and one row group,
// not by the table. Sub-benchmarks: "copy" (the default, pages copied),
// "recode" (Options.Recode: rows decoded and encoded again) and "sort"
// (the table clustered by reward: its rows sorted in runs of what the
// default budget holds, spilled, and merged), each on a copy of the table.
//
//	go test -run '^$' -bench CompactionMemory -benchtime 1x ./compactor
//
// With STRATA_MEMORY_BOUND_MIB set, a peak above it fails the benchmark;
// the test command sets 512.
func BenchmarkCompactionMemory(b *testing.B) {
	dir := b.TempDir()
	u := "file://" + dir
	bk, err := blob.Open(ctx, u)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := commit.Create(ctx, bk, rollouts.Schema, nil, nil); err != nil {
		b.Fatal(err)
	}
	tb, _ := commit.OpenTable(ctx, bk, nil)
	const frags, rows = 2000, 200
	for i := range frags {
		rec := rollouts.Batch(nil, 42, 0, int64(i*rows), rows)
		if _, err := tb.Append(ctx, rec); err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	for _, mode := range []string{"copy", "recode", "sort"} {
		b.Run(mode, func(b *testing.B) {
			src := b.TempDir()
			if err := os.CopyFS(src, os.DirFS(dir)); err != nil {
				b.Fatal(err)
			}
			if mode == "sort" {
				sb, err := blob.Open(ctx, "file://"+src)
				if err != nil {
					b.Fatal(err)
				}
				st, err := commit.OpenTable(ctx, sb, nil)
				if err == nil {
					_, err = st.Alter(ctx, evolve.ColumnChange{Op: evolve.ClusterBy, Columns: []string{"reward"}})
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				cmd := testenv.ChildCommand(compactChild, "file://"+src, mode)
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatalf("%v\n%s", err, out)
				}
				ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
				peak := float64(ru.Maxrss) / 1024
				b.ReportMetric(peak, "peak-rss-MiB")
				// STRATA_MEMORY_BOUND_MIB makes the bound a check (CI sets it).
				if bound, err := strconv.ParseFloat(os.Getenv("STRATA_MEMORY_BOUND_MIB"), 64); err == nil && peak > bound {
					b.Fatalf("compacting 2,000 fragments (%s) peaked at %.0f MiB, over the bound of %.0f MiB", mode, peak, bound)
				}
				b.ReportMetric(time.Since(t0).Seconds(), "compact-s")
				b.Logf("%s", out)
			}
		})
	}
}
