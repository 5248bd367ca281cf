package compactor_test

// What package compactor promises (its doc comment, and DESIGN's
// invariants 2 and 4), and the test that pins each:
//
//   - ShouldCompact is a pure function of the table's state, a policy and a
//     clock (quiet windows may wrap midnight): TestShouldCompact,
//     TestParseWindow; PlanCompaction bins adjacent small fragments:
//     TestPlanBinsAdjacentSmallFragments.
//   - Compaction conserves rows and the bytes of every value, and drops
//     deleted rows: TestCompactionConservesRowsAndBlobsFile,
//     TestCompactionConservesRowsAndBlobsMinIO,
//     TestCompactionDropsDeletedRows, TestVolumeCompactionOverRandomHistories;
//     pages copied are the pages decoded and written again:
//     TestVolumeCopiedCompactionEqualsDecodedFile,
//     TestVolumeCopiedCompactionEqualsDecodedMinIO, TestCopyRefusesADamagedPage,
//     TestCopiedStatisticsAreNeverNarrowerThanTheRows.
//   - Memory is bounded by a few batches and one row group, not the table:
//     BenchmarkCompactionMemory (a target, so a benchmark; no test).
//   - Appends and shard merges never conflict with a compaction:
//     TestCompactionWithConcurrentAppendsAndMergesFile,
//     TestCompactionWithConcurrentAppendsAndMergesMinIO; a Delete or
//     another Rewrite over the same fragments makes it plan again, never
//     lose a row: TestTwoCompactorsAtOnce, TestVolumeCompactionOverRandomHistories.
//   - One driver per table is expected, through a lease; correctness never
//     depends on it: TestLeaseKeepsASecondJobOutUntilItExpiresOrIsReleased,
//     TestACompactionRespectsAnotherHoldersLease, TestTwoCompactorsAtOnce.
//   - Compaction keeps its totals, last error and a bounded history:
//     TestHistoryCarriesTotalsAndTheLastError,
//     TestACorruptHistoryRecordIsSkipped.
//   - Garbage collection never deletes what a reader may reach — the
//     newest, young and tagged versions, those the Iceberg view names, and
//     what they reference — nor an object younger than the safety age:
//     TestGCRemovesOnlyWhatItMay, TestGCKeepsEveryVersionTheIcebergViewNames,
//     TestGCKeepsUploadsOfASlowWriterThatThenCommits,
//     TestATagRacingACollectionIsKeptOrRefused, TestGCNeverGoesBelowItsFloor;
//     it deletes versions oldest first: TestGCDeletesVersionsOldestFirst.
//   - An idle table costs no requests beyond the pass's own reads:
//     TestIdleCostsNothing.

import (
	"slices"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/lakehouse"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/value"
)

// rowCount scans version v and returns its rows, failing if the scan
// cannot read every object the version names.
func rowCount(t *testing.T, b blob.Bucket, v uint64) int64 {
	t.Helper()
	s, err := table.Open(ctx, b, &table.OpenOptions{Version: v})
	if err != nil {
		t.Fatalf("version %d: %v", v, err)
	}
	var n int64
	for rec, err := range s.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatalf("a scan of version %d: %v", v, err)
		}
		n += rec.NumRows()
	}
	return n
}

// Garbage collection keeps every version the table's Iceberg view names —
// the oldest as much as the newest — with every object it and the view's
// newest metadata reference, while it collects the versions older and
// between that the policy lets go.
func TestGCKeepsEveryVersionTheIcebergViewNames(t *testing.T) {
	dir := t.TempDir()
	b := rolloutsTable(t, dir, 0, 6, 10) // versions 1..7
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, n, err := tb.Delete(ctx, expr.Lt("step", value.Int(15))); err != nil || n == 0 { // v8, a deletion vector
		t.Fatalf("delete: %d rows, %v", n, err)
	}
	loc, err := layout.LocationOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A view of the newest three versions, as an export an hour on makes it.
	res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc, KeepVersions: 3, RetainFor: time.Minute}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Snapshots, []uint64{6, 7, 8}) {
		t.Fatalf("the view describes %v, want versions 6, 7, 8", res.Snapshots)
	}
	// Compaction replaces every fragment those versions name; two appends.
	if _, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil); err != nil { // v9
		t.Fatal(err)
	}
	appendRollouts(t, b, 1, 0, 2, 10) // v10, v11
	before := map[uint64]int64{}
	for _, v := range res.Snapshots {
		before[v] = rowCount(t, b, v)
	}
	refs, err := layout.ReadRefs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}

	gc, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 2, RetainFor: time.Hour, SafetyAge: time.Hour}, time.Now().Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Snapshots {
		if slices.Contains(gc.VersionsDeleted, v) {
			t.Fatalf("GC deleted version %d, which the Iceberg view names (deleted %v)", v, gc.VersionsDeleted)
		}
		if n := rowCount(t, b, v); n != before[v] {
			t.Fatalf("version %d, named by the view, reads %d rows after GC, %d before", v, n, before[v])
		}
	}
	for k := range refs.Keys {
		if !exists(t, b, k) {
			t.Fatalf("GC deleted %s, which the view's newest metadata names", k)
		}
	}
	// Not vacuous: what the view does not name went.
	if want := []uint64{1, 2, 3, 4, 5, 9}; !sameSet(gc.VersionsDeleted, want) {
		t.Fatalf("GC deleted versions %v, want %v", gc.VersionsDeleted, want)
	}
}

func sameSet(a, b []uint64) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
