package compactor_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// clusterBy sets the table's cluster key.
func clusterBy(t *testing.T, b blob.Bucket, cols ...string) {
	t.Helper()
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.ClusterBy, Columns: cols}); err != nil {
		t.Fatal(err)
	}
}

// rewardsInOrder reads the table fragment by fragment, in each one's row
// order, and fails unless every fragment is sorted by reward and records
// it; it returns the fragments.
func rewardsInOrder(t *testing.T, b blob.Bucket) []format.Fragment {
	t.Helper()
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	frags := s.Manifest().Fragments
	for _, f := range frags {
		if !slices.Equal(f.SortedBy, []string{"reward"}) {
			t.Fatalf("fragment %d records sorted_by %v, want [reward]", f.ID, f.SortedBy)
		}
		last := -1.0
		for rec, err := range s.Scan(ctx, table.ScanOptions{Columns: []string{"reward"}, Fragments: []uint64{f.ID}}) {
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rec.Column(0).(*array.Float64).Float64Values() {
				if r < last {
					t.Fatalf("fragment %d: reward %v after %v: not sorted", f.ID, r, last)
				}
				last = r
			}
		}
	}
	return frags
}

// A table clustered by a column is compacted into fragments sorted by
// it, in small row groups: every row kept byte for byte, and a filter
// matching 1% of the rows reads a few percent of the table's bytes, where
// before it read them all.
func TestClusteredCompactionSortsAndFiltersPruneFile(t *testing.T) {
	clusteredPrunes(t, "file://"+t.TempDir())
}

func TestClusteredCompactionSortsAndFiltersPruneMinIO(t *testing.T) {
	clusteredPrunes(t, testenv.MinIO(t).URL(t))
}

func clusteredPrunes(t *testing.T, u string) {
	b := rolloutsTable(t, u, 0, 40, 250)
	before := digest(t, b)
	filter := expr.Lt("reward", value.Float(0.01))
	readFraction := func() (float64, int64) {
		s, err := table.Open(ctx, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		cb := blob.NewCounted(b)
		var n int64
		for rec, err := range table.NewSnapshot(cb, s.Manifest()).Scan(ctx, table.ScanOptions{Filter: filter}) {
			if err != nil {
				t.Fatal(err)
			}
			n += rec.NumRows()
		}
		return float64(cb.Stats().BytesIn) / float64(s.Manifest().Bytes()), n
	}
	unclustered, want := readFraction()
	if unclustered < 0.8 {
		t.Fatalf("before clustering the filter read %.1f%% of the table; the test needs it to read all", 100*unclustered)
	}
	clusterBy(t, b, "reward")
	res, err := compactor.Compact(ctx, b, &compactor.Policy{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.FragmentsAfter != 1 || res.BinsSorted != 1 || res.BinsCopied != 0 || res.Spills != 0 {
		t.Fatalf("compaction: %d fragments after, %d bins sorted, %d copied; want 1, 1, 0", res.FragmentsAfter, res.BinsSorted, res.BinsCopied)
	}
	sameRows(t, before, digest(t, b), "a sorting compaction")
	rewardsInOrder(t, b)
	clustered, got := readFraction()
	if got != want {
		t.Fatalf("the filter counts %d rows after clustering, %d before", got, want)
	}
	if clustered > 0.1 {
		t.Fatalf("a 1%% filter on the cluster key read %.1f%% of the table's bytes", 100*clustered)
	}
	t.Logf("a 1%% filter read %.1f%% of the table before clustering, %.1f%% after", 100*unclustered, 100*clustered)
	// Sorted by the key, the fragment is not rewritten again.
	if due, why := compactor.ShouldCompact(readManifest(t, b), compactor.Policy{}, time.Now()); due {
		t.Fatalf("compaction due again after sorting: %s", why)
	}
}

// A bin holding more rows than the memory budget sorts at once is sorted
// in runs, spilled and merged into one sorted fragment, within the
// budget; the spills are gone after.
func TestClusteredCompactionSortsWithinTheBudget(t *testing.T) {
	// 48 MiB sorts 24 MB of rows in two runs, merged at once; the least
	// budget in runs of under 3 MiB, merged two at a time in passes.
	for _, budget := range []int64{48 << 20, compactor.MinMemoryBudget} {
		t.Run(fmt.Sprint(budget>>20, "MiB"), func(t *testing.T) {
			b := rolloutsTable(t, "file://"+t.TempDir(), 0, 40, 250)
			before := digest(t, b)
			clusterBy(t, b, "reward")
			sources := readManifest(t, b).Objects()
			res, err := compactor.Compact(ctx, b, &compactor.Policy{}, &compactor.Options{MemoryBudget: budget})
			if err != nil {
				t.Fatal(err)
			}
			if res.FragmentsBefore != 40 || res.BinsSorted != 1 || res.FragmentsAfter != 1 || res.Spills < 2 {
				t.Fatalf("compaction: %d fragments before, %d bins sorted, %d runs spilled, %d after; want 40, 1, several, 1",
					res.FragmentsBefore, res.BinsSorted, res.Spills, res.FragmentsAfter)
			}
			if res.PeakMemory > budget {
				t.Fatalf("held %d bytes at once, over the budget of %d", res.PeakMemory, budget)
			}
			t.Logf("%d runs spilled, holding at most %d bytes of a budget of %d", res.Spills, res.PeakMemory, budget)
			sameRows(t, before, digest(t, b), "a sorting compaction within a budget")
			rewardsInOrder(t, b)
			// No object but the sources and the output is left: the
			// spills went.
			kept := map[string]bool{}
			for _, k := range append(sources, readManifest(t, b).Objects()...) {
				kept[k] = true
			}
			for o, err := range blob.List(ctx, b, "data/", 0) {
				if err != nil {
					t.Fatal(err)
				}
				if !kept[o.Key] {
					t.Errorf("%s is left, referenced by no version", o.Key)
				}
			}
		})
	}
}

// A large fragment written before the table had a cluster key is sorted
// (with its small neighbours), once; one larger than a run may read is
// left as it is, and does not stop the runs.
func TestClusteredCompactionSortsALargeFragmentOnce(t *testing.T) {
	b := rolloutsTable(t, "file://"+t.TempDir(), 0, 20, 250)
	if _, err := compactor.Compact(ctx, b, &compactor.Policy{}, nil); err != nil {
		t.Fatal(err)
	}
	clusterBy(t, b, "reward")
	policy := compactor.Policy{TargetRows: 20_000, SmallRows: 1_000}
	if plan := compactor.PlanCompaction(readManifest(t, b), policy); len(plan.Bins) != 1 || len(plan.Bins[0].Fragments) != 1 {
		t.Fatalf("the large fragment alone: %s; want it in a bin of its own", plan)
	}
	// Larger than a run may read, it is left as it is: never due, never
	// planned, and the small fragments after it still are.
	appendRollouts(t, b, 1, 0, 3, 10)
	m := readManifest(t, b)
	tight := policy
	tight.MaxSourceBytes, tight.MinFragments = m.Fragments[0].Bytes-1, 2
	if due, why := compactor.ShouldCompact(m, compactor.Policy{MaxSourceBytes: tight.MaxSourceBytes, MinFragments: 5}, time.Now()); due {
		t.Fatalf("compaction due for a fragment larger than a run reads: %s", why)
	}
	if plan := compactor.PlanCompaction(m, tight); len(plan.Bins) != 1 || len(plan.Bins[0].Fragments) != 3 {
		t.Fatalf("with the large fragment over the run's bound: %s; want one bin of the 3 small fragments", plan)
	}
	if due, why := compactor.ShouldCompact(m, policy, time.Now()); !due {
		t.Fatalf("compaction not due for a large fragment the cluster key does not order: %s", why)
	}
	before := digest(t, b)
	res, err := compactor.Compact(ctx, b, &policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.FragmentsBefore != 4 || res.BinsSorted != 1 || res.FragmentsAfter != 1 {
		t.Fatalf("compaction: %d fragments before, %d bins sorted, %d after; want 4, 1, 1", res.FragmentsBefore, res.BinsSorted, res.FragmentsAfter)
	}
	sameRows(t, before, digest(t, b), "sorting a large fragment")
	rewardsInOrder(t, b)
	if due, why := compactor.ShouldCompact(readManifest(t, b), policy, time.Now()); due {
		t.Fatalf("compaction due again after sorting: %s", why)
	}
	if res, err := compactor.Compact(ctx, b, &policy, nil); err != nil || res.Version != 0 {
		t.Fatalf("a second compaction: version %d, %v; want nothing committed", res.Version, err)
	}
}

// The cluster key follows a rename and ends at a dropped column; a table
// with a key index takes no cluster key, and a clustered one no index.
func TestClusterKeyFollowsItsColumns(t *testing.T) {
	b := rolloutsTable(t, "file://"+t.TempDir(), 0, 2, 10)
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.ClusterBy, Columns: []string{"prompt", "nope"}}); !errors.Is(err, evolve.ErrBadSchemaChange) {
		t.Fatalf("clustering by a missing column: %v, want ErrBadSchemaChange", err)
	}
	clusterBy(t, b, "worker", "step")
	if _, err := tb.CreateIndex(ctx, "id"); !errors.Is(err, commit.ErrClusteredIndex) {
		t.Fatalf("an index on a clustered table: %v, want ErrClusteredIndex", err)
	}
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.RenameColumn, Column: "step", To: "turn"}); err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, b)
	if names, _, ok := evolve.ClusterColumns(m.Schema(), m.ClusterBy); !ok || !slices.Equal(names, []string{"worker", "turn"}) {
		t.Fatalf("after a rename the cluster key is %v (%v), want [worker turn]", names, ok)
	}
	if major, minor := m.Format(); minor != 1 {
		t.Fatalf("a clustered table's version is written in format %d.%d, want minor 1", major, minor)
	}
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.DropColumn, Column: "turn"}); err != nil {
		t.Fatal(err)
	}
	if m := readManifest(t, b); !slices.Equal(m.ClusterBy, []string{"worker"}) {
		t.Fatalf("after dropping its second column the cluster key is %v, want [worker]", m.ClusterBy)
	}
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.ClusterBy}); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.CreateIndex(ctx, "id"); err != nil {
		t.Fatalf("an index once the cluster key is cleared: %v", err)
	}
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.ClusterBy, Columns: []string{"worker"}}); !errors.Is(err, commit.ErrClusteredIndex) {
		t.Fatalf("a cluster key on an indexed table: %v, want ErrClusteredIndex", err)
	}
}

func readManifest(t *testing.T, b blob.Bucket) *format.Manifest {
	t.Helper()
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s.Manifest()
}

// Columns of every kind — lists, structs, maps, nulls — keep their rows
// through a sort, in memory and through spills and their merge.
func TestClusteredCompactionKeepsNestedColumns(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "k", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "meta", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
		{Name: "attrs", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Float64), Nullable: true},
		{Name: "pad", Type: arrow.BinaryTypes.Binary},
	}, nil)
	for _, budget := range []int64{0, compactor.MinMemoryBudget} {
		b, err := blob.Open(ctx, "file://"+t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := commit.Create(ctx, b, schema, nil, nil); err != nil {
			t.Fatal(err)
		}
		tb, err := commit.OpenTable(ctx, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		pad := strings.Repeat("x", 2000)
		for f := range 20 {
			var sb strings.Builder
			sb.WriteString("[")
			for i := range 300 {
				id := f*300 + i
				if i > 0 {
					sb.WriteString(",")
				}
				k := fmt.Sprintf(`"%08d"`, (id*7919)%6000)
				if id%17 == 0 {
					k = "null"
				}
				fmt.Fprintf(&sb, `{"id":%d,"k":%s,"tags":["t%d","u"],"meta":{"a":%d},"attrs":[{"key":"w","value":%d.5}],"pad":"%s"}`,
					id, k, id, id%5, id, base64.StdEncoding.EncodeToString([]byte(pad[:id%2000])))
			}
			sb.WriteString("]")
			rec, _, err := array.RecordFromJSON(testenv.Allocator(t), schema, strings.NewReader(sb.String()))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tb.Append(ctx, rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
		rows := func() []string {
			t.Helper()
			var out []string
			for rec, err := range readSnapshot(t, b).Scan(ctx, table.ScanOptions{}) {
				if err != nil {
					t.Fatal(err)
				}
				for i := range int(rec.NumRows()) {
					var sb strings.Builder
					for c := range int(rec.NumCols()) {
						sb.WriteString(rec.Column(c).ValueStr(i) + "|")
					}
					out = append(out, sb.String())
				}
			}
			return out
		}
		before := rows()
		clusterBy(t, b, "k")
		res, err := compactor.Compact(ctx, b, &compactor.Policy{}, &compactor.Options{MemoryBudget: budget})
		if err != nil {
			t.Fatal(err)
		}
		after := rows()
		// In the sorted fragment, k rises and its nulls come last.
		var last string
		seenNull := false
		for _, r := range after {
			k := strings.Split(r, "|")[1]
			if k == "(null)" {
				seenNull = true
				continue
			}
			if seenNull || k < last {
				t.Fatalf("budget %d: k %q after %q (a null before: %v): not sorted", budget, k, last, seenNull)
			}
			last = k
		}
		slices.Sort(before)
		slices.Sort(after)
		if !slices.Equal(before, after) {
			t.Fatalf("budget %d: the rows changed in a sort (%d runs spilled)", budget, res.Spills)
		}
		t.Logf("budget %d: %d rows kept, %d runs spilled", budget, len(after), res.Spills)
	}
}

func readSnapshot(t *testing.T, b blob.Bucket) *table.Snapshot {
	t.Helper()
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// cancelOnSpillRead cancels a run when it first reads an object under
// data/ that is not among known: a spill being merged.
type cancelOnSpillRead struct {
	blob.Bucket
	known  map[string]bool
	cancel context.CancelFunc
	hit    atomic.Bool
}

func (c *cancelOnSpillRead) spill(key string) {
	if strings.HasPrefix(key, "data/") && !c.known[key] && !c.hit.Swap(true) {
		c.cancel()
	}
}

func (c *cancelOnSpillRead) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	c.spill(key)
	return c.Bucket.NewRangeReader(ctx, key, off, n)
}

func (c *cancelOnSpillRead) Get(ctx context.Context, key string) ([]byte, error) {
	c.spill(key)
	return c.Bucket.Get(ctx, key)
}

// A sorting compaction cancelled while it merges its spills commits
// nothing and leaves no spill behind.
func TestACancelledSortLeavesNoSpills(t *testing.T) {
	b := rolloutsTable(t, "file://"+t.TempDir(), 0, 40, 250)
	clusterBy(t, b, "reward")
	known := map[string]bool{}
	for _, k := range readManifest(t, b).Objects() {
		known[k] = true
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cb := &cancelOnSpillRead{Bucket: b, known: known, cancel: cancel}
	res, err := compactor.Compact(cctx, cb, &compactor.Policy{}, &compactor.Options{MemoryBudget: compactor.MinMemoryBudget, Leased: true})
	if !cb.hit.Load() || err == nil || res.Version != 0 {
		t.Fatalf("a compaction cancelled in its merge: spill read %v, version %d, %v", cb.hit.Load(), res.Version, err)
	}
	for o, err := range blob.List(ctx, b, "data/", 0) {
		if err != nil {
			t.Fatal(err)
		}
		if !known[o.Key] {
			t.Errorf("%s is left, referenced by no version", o.Key)
		}
	}
}

// A bin sorted by the cluster key is written in fragments of the target
// size, each holding the keys after the one before, in memory and through
// spills: the manifest's statistics then rule out whole fragments, and a
// filter on the key opens one.
func TestClusteredCompactionSplitsIntoDisjointRanges(t *testing.T) {
	for _, budget := range []int64{0, compactor.MinMemoryBudget} {
		t.Run(fmt.Sprint(budget>>20, "MiB"), func(t *testing.T) {
			b := rolloutsTable(t, "file://"+t.TempDir(), 0, 40, 250)
			before := digest(t, b)
			clusterBy(t, b, "reward")
			policy := &compactor.Policy{TargetRows: 2_000}
			if plan := compactor.PlanCompaction(readManifest(t, b), *policy); len(plan.Bins) != 1 || plan.Outputs() != 5 {
				t.Fatalf("plan: %s; want one bin sorted into 5 fragments", plan)
			}
			res, err := compactor.Compact(ctx, b, policy, &compactor.Options{MemoryBudget: budget})
			if err != nil {
				t.Fatal(err)
			}
			if res.BinsSorted != 1 || res.FragmentsAfter != 5 {
				t.Fatalf("compaction: %d bins sorted, %d fragments after; want 1, 5", res.BinsSorted, res.FragmentsAfter)
			}
			sameRows(t, before, digest(t, b), "a sort split into fragments")
			frags := rewardsInOrder(t, b)
			last := -1.0
			for _, f := range frags {
				var lo, hi float64
				for _, c := range f.Columns {
					if c.Name == "reward" && c.Min != nil && c.Max != nil {
						lo, hi = c.Min.F, c.Max.F
					}
				}
				if f.Rows != 2_000 || lo < last || hi < lo {
					t.Fatalf("fragment %d: %d rows, reward %v..%v after %v; want 2,000 rows above the fragment before", f.ID, f.Rows, lo, hi, last)
				}
				last = hi
			}
			s := readSnapshot(t, b)
			cb := blob.NewCounted(b)
			var n int64
			for rec, err := range table.NewSnapshot(cb, s.Manifest()).Scan(ctx, table.ScanOptions{Filter: expr.Lt("reward", value.Float(0.01))}) {
				if err != nil {
					t.Fatal(err)
				}
				n += rec.NumRows()
			}
			if read := cb.Stats().BytesIn; n == 0 || read > frags[0].Bytes {
				t.Fatalf("a filter on the key's first fifth read %d rows, %d bytes; want rows, and no more than the first fragment's %d bytes", n, read, frags[0].Bytes)
			}
			if res, err := compactor.Compact(ctx, b, policy, nil); err != nil || res.Version != 0 {
				t.Fatalf("a second compaction: version %d, %v; want nothing to do", res.Version, err)
			}
		})
	}
}

// The fragments of a sorted bin are cut at about the target stored bytes
// too, as the plan tells; a bin of no live rows leaves no fragment.
func TestClusteredCompactionCutsAtTheTargetBytes(t *testing.T) {
	b := rolloutsTable(t, "file://"+t.TempDir(), 0, 40, 250)
	before := digest(t, b)
	clusterBy(t, b, "reward")
	m := readManifest(t, b)
	policy := compactor.Policy{TargetBytes: m.Bytes() / 6}
	plan := compactor.PlanCompaction(m, policy)
	res, err := compactor.Compact(ctx, b, &policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.FragmentsAfter, plan.Outputs(); got < want-1 || got > want+1 {
		t.Fatalf("%d fragments written, the plan said %d", got, want)
	}
	sameRows(t, before, digest(t, b), "a sort cut at the target bytes")
	frags := rewardsInOrder(t, b)
	for _, f := range frags {
		if f.Bytes > policy.TargetBytes*3/2 {
			t.Fatalf("fragment %d stores %d bytes, past the target %d by more than a row group", f.ID, f.Bytes, policy.TargetBytes)
		}
	}
	// Every row deleted: the bin leaves nothing.
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Delete(ctx, expr.Ge("id", value.Int(0))); err != nil {
		t.Fatal(err)
	}
	res, err = compactor.Compact(ctx, b, &compactor.Policy{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := readManifest(t, b); len(m.Fragments) != 0 || m.Rows() != 0 {
		t.Fatalf("after compacting a table of no live rows: %d fragments, %d rows (%+v)", len(m.Fragments), m.Rows(), res)
	}
}
