package table_test

// What package table promises (its doc comment and docs/format.md), and
// the test that pins each:
//
//   - No object is overwritten: tags are created with PutIfAbsent and
//     never move: TestTagsNameVersionsAndNeverMove; fragments get fresh
//     names: TestFragmentsGetFreshNames (manifests are created by package
//     commit, with PutIfAbsent: its tests).
//   - Manifest names count down, so the first key a LIST returns is the
//     newest version: TestManifestKeysSortNewestFirst,
//     TestVersionsListNewestFirst; opening the latest version costs one
//     LIST page and one GET whatever the number of versions:
//     TestOpeningTheLatestVersionCostsOneListAndOneGet.
//   - A Snapshot is immutable — it reads only objects its manifest names,
//     and its rows never change, whatever is committed after it:
//     TestASnapshotsRowsNeverChange.
//   - Decoding checks a manifest's magic, format version, length and
//     checksum; a damaged or unknown object is a typed error naming its
//     key, never a panic: TestDamagedManifestsAreCorruptErrorsNamingTheKey,
//     TestNewerMajorFormatIsRefusedClearly,
//     TestCorruptFragmentIsATypedErrorNamingTheObject,
//     TestDeletionVectorsAndIndexesClaimingTooMuchAreCorrupt,
//     TestAnIndexOutOfOrderIsCorrupt, TestManifestFrameClaimingTooMuchIsCorrupt,
//     TestAFooterWithANegativeChunkLengthIsCorrupt,
//     TestAFooterSchemaClaimingAHugeBodyIsCorrupt,
//     TestAFragmentShorterThanRecordedIsCorrupt,
//     TestADamagedPageOfAFragmentReadByRangesIsCorrupt, and the fuzz
//     targets FuzzDecodeManifest, FuzzDecodeManifestPayload,
//     FuzzDecodeManifestFrames, FuzzDecodeDeletions, FuzzDecodeIndex,
//     FuzzDecodeColumnsAtOnce.
//   - The manifest encoding round-trips (docs/format.md, manifests):
//     TestManifestRoundTrips, TestManifestFramesRoundTripAtEveryChunkBoundary,
//     TestOneFrameManifestsStillRead, TestCachedStateEncodingEqualsPlainJSON.
//   - Rows the table cannot take are refused before anything is written,
//     naming the column and both types: TestConformRefusesWhatTheTableCannotTake,
//     TestAppendOfAnotherSchemaIsRefusedBeforeWriting,
//     TestInputErrorNamesTheTypesItKnows; what converts without loss is
//     taken: TestConformTakesWhatConvertsWithoutLoss.
//   - Scans return every row with every column, honour projection and
//     predicates, and hide deleted rows: TestAppendThenScanReturnsEveryRowWithEveryColumn,
//     TestProjectionAndPredicates, TestProjectionReturnsOnlyAskedColumns,
//     TestDeleteByPredicateHidesRowsFromScansAndCounts,
//     TestCountUsesStatisticsWhenTheyDecide.
//   - Tables are found by listing folders, a request a folder, and never
//     share a folder: TestListTablesFindsEveryLegalNameAndPlacementKeepsTablesApart,
//     TestListTablesCostsAListAFolderWhateverTablesHold,
//     TestCheckPlacementNamesTheTableInTheWay.
//   - Idempotency records (producers, keys, their window): the list at the
//     top of idempotency_test.go.

import (
	"slices"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/table/value"
)

// The same rows written twice make two objects under two fresh names.
func TestFragmentsGetFreshNames(t *testing.T) {
	b := memBucket(t)
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 5)
	defer rec.Release()
	f1, err := fragment.Write(ctx, b, rollouts.Schema, rec)
	if err != nil {
		t.Fatal(err)
	}
	f2, err := fragment.Write(ctx, b, rollouts.Schema, rec)
	if err != nil {
		t.Fatal(err)
	}
	if f1.Key == f2.Key {
		t.Fatalf("two fragments share the name %s", f1.Key)
	}
	for _, k := range []string{f1.Key, f2.Key} {
		if _, err := b.Attributes(ctx, k); err != nil {
			t.Fatalf("fragment %s: %v", k, err)
		}
	}
}

func openCost(t *testing.T, b blob.Bucket) blob.Stats {
	t.Helper()
	before, _ := blob.StatsOf(b)
	if _, err := table.Open(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	after, _ := blob.StatsOf(b)
	return after.Sub(before)
}

// Opening the latest version of a table of 3 versions and of one of 2,000
// costs the same: one LIST page and one GET.
func TestOpeningTheLatestVersionCostsOneListAndOneGet(t *testing.T) {
	for _, n := range []int{2, 2000} {
		b := memBucket(t)
		tb := newTable(t, b, 1, 1)
		for range n - 1 {
			if _, err := tb.Commit(ctx, format.Transaction{Kind: format.KindAppend}); err != nil {
				t.Fatal(err)
			}
		}
		if c := openCost(t, b); c.Requests() != 2 || c.Lists != 1 || c.Gets != 1 {
			t.Fatalf("opening the latest of %d versions: %+v; want one LIST and one GET", n+1, c)
		}
	}
}

// A snapshot reads the same rows — through the same handle and opened
// again at its version — after appends, a delete and a compaction that
// replaced every fragment it names.
func TestASnapshotsRowsNeverChange(t *testing.T) {
	b := memBucket(t)
	tb := newTable(t, b, 4, 10)
	snap := tb.Current()
	want := scanIDs(t, snap, table.ScanOptions{})
	slices.Sort(want)
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 0, 10)
	defer rec.Release()
	if _, err := tb.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, n, err := tb.Delete(ctx, expr.Lt("step", value.Int(15))); err != nil || n == 0 {
		t.Fatalf("delete: %d rows, %v", n, err)
	}
	if _, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil); err != nil {
		t.Fatal(err)
	}
	latest, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range snap.Manifest().Fragments {
		if latest.Manifest().Fragment(f.ID) != nil {
			t.Fatalf("the compaction left fragment %d of the snapshot in place", f.ID)
		}
	}
	again, err := table.Open(ctx, b, &table.OpenOptions{Version: snap.Version()})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*table.Snapshot{"the same handle": snap, "opened again": again} {
		got := scanIDs(t, s, table.ScanOptions{})
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("version %d read through %s: %d rows, %d before", snap.Version(), name, len(got), len(want))
		}
	}
}
