package commit_test

// What package commit promises (its doc comment; DESIGN's invariants 3 and
// 5 where a commit carries them), and the test that pins each:
//
//   - Never a duplicate commit: after a create that may hide a landed
//     write, the loop reads the manifest at that version and compares
//     commit ids: TestAppendsUnderFaultsAreNeitherLostNorDoubled,
//     TestCommitHistoryIsLinearizable; when the store answers none of those
//     reads, the error wraps ErrOutcomeUnknown:
//     TestAnUnanswerableCreateIsAnUnknownOutcome,
//     TestACommitCanceledMidCreateIsAnUnknownOutcome,
//     TestACommitWaitsForTheStoreToTellItsOutcome.
//   - Never a lost commit: success only when our manifest exists above the
//     GC boundary: TestStalledWriterCannotResurrectACollectedVersion,
//     TestAStallPastGCDoesNotLoseAnAcknowledgedAppend and the other
//     TestAStall… tests of stall_test.go.
//   - The conflict matrix, cell by cell (Append never conflicts with
//     Rewrite; two Rewrites over a common fragment conflict):
//     TestConflictMatrixCellByCell; a Rewrite over a fragment a Delete
//     changed is refused: TestARewriteOverAFragmentADeleteChangedIsRefused.
//   - A loser rebases on the winner and tries the next version one round
//     trip after losing: TestALoserRetriesOneRoundTripAfterLosing; it backs
//     off only in a storm: TestALoserBacksOffOnlyInAStorm.
//   - Opening the latest version costs the same however many versions
//     exist: TestOpenLatestCostDoesNotGrowWithVersions.
//   - A version is a snapshot while writers commit:
//     TestSnapshotReadsDoNotChangeWhileWritersCommit; concurrent appends
//     from goroutines and processes land once each at consecutive versions:
//     TestEightGoroutinesAppend…, TestFourProcessesAppend….
//   - Merging is exactly-once: a shard's watermark moves in the manifest
//     that adds its rows — an owner's merge:
//     TestAShardMergeMovesItsWatermarkInTheManifestThatAddsItsRows; a fleet
//     merge, every shard it names:
//     TestAFleetMergeMovesEveryShardsWatermarkInTheManifestThatAddsItsRows;
//     a second merge of the same generations adds nothing:
//     TestASecondMergeOfTheSameGenerationsAddsNothing.
//   - A fenced writer can do no harm: a merge from an epoch older than the
//     table's mark for its shard is refused:
//     TestAMergeFromAFencedEpochIsRefused.
//   - Idempotent appends: the list at the top of idempotent_test.go.
//   - Options: defaults and validation: TestOptionsDefaultsAndValidate.

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// generation writes ids as generation gen of shard at epoch, as a shard
// flush names it, and returns its fragment.
func generation(t *testing.T, b blob.Bucket, shard string, gen, epoch uint64, ids ...int64) format.Fragment {
	t.Helper()
	rec := idBatch(ids...)
	defer rec.Release()
	f, err := fragment.Write(ctx, b, idSchema, rec)
	if err != nil {
		t.Fatal(err)
	}
	data, err := b.Get(ctx, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	f.Key = format.GenerationKey(shard, gen, epoch, format.NewID())
	if err := b.PutIfAbsent(ctx, f.Key, data); err != nil {
		t.Fatal(err)
	}
	return f
}

// marks returns the shard marks of the latest version, read from the
// bucket.
func marks(t *testing.T, b blob.Bucket) map[string]format.ShardMark {
	t.Helper()
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	return m.Shards
}

func sameMarks(t *testing.T, where string, got, want map[string]format.ShardMark) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Fatalf("%s: the table's shard marks are %v, want %v", where, got, want)
	}
}

func sameIDs(t *testing.T, b blob.Bucket, want ...int64) {
	t.Helper()
	got := latestIDs(t, b)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("the table holds ids %v, want %v", got, want)
	}
}

func TestAShardMergeMovesItsWatermarkInTheManifestThatAddsItsRows(t *testing.T) {
	b := open(t, "mem://")
	createIDTable(t, b)
	g1, g2 := generation(t, b, "a", 1, 1, 1, 2), generation(t, b, "a", 2, 1, 3)
	res, err := commit.Commit(ctx, b, nil, format.Transaction{Kind: format.KindMerge, Shard: "a", Watermark: 2, Epoch: 1,
		Added: []format.Fragment{g1, g2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Done || res.Manifest == nil || res.Manifest.Shards["a"] != (format.ShardMark{Watermark: 2, Epoch: 1}) {
		t.Fatalf("the merge's manifest: %+v", res)
	}
	sameMarks(t, "after the merge", marks(t, b), map[string]format.ShardMark{"a": {Watermark: 2, Epoch: 1}})
	sameIDs(t, b, 1, 2, 3)
}

// A fleet merge of three shards moves each one's watermark — the last
// named as much as the first — in the manifest that adds their
// generations.
func TestAFleetMergeMovesEveryShardsWatermarkInTheManifestThatAddsItsRows(t *testing.T) {
	b := open(t, "mem://")
	createIDTable(t, b)
	added := []format.Fragment{
		generation(t, b, "a", 1, 1, 1), generation(t, b, "a", 2, 1, 2),
		generation(t, b, "b", 1, 3, 3),
		generation(t, b, "c", 1, 2, 4), generation(t, b, "c", 2, 2, 5), generation(t, b, "c", 3, 2, 6),
	}
	merges := []format.ShardMerge{{Shard: "a", Watermark: 2, Epoch: 1}, {Shard: "b", Watermark: 1, Epoch: 3}, {Shard: "c", Watermark: 3, Epoch: 2}}
	res, err := commit.Commit(ctx, b, nil, format.Transaction{Kind: format.KindMerge, Merges: merges, Added: added}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]format.ShardMark{"a": {Watermark: 2, Epoch: 1}, "b": {Watermark: 1, Epoch: 3}, "c": {Watermark: 3, Epoch: 2}}
	if res.Manifest == nil {
		t.Fatalf("the fleet merge wrote no manifest: %+v", res)
	}
	sameMarks(t, "the fleet merge's manifest", res.Manifest.Shards, want)
	sameMarks(t, "the latest version", marks(t, b), want)
	sameIDs(t, b, 1, 2, 3, 4, 5, 6)

	// Apply, the pure form, makes the same state from any version.
	cur, err := table.ReadManifest(ctx, b, 1)
	if err != nil {
		t.Fatal(err)
	}
	next, err := commit.Apply(cur, &format.Transaction{Kind: format.KindMerge, Merges: merges, Added: added})
	if err != nil {
		t.Fatal(err)
	}
	sameMarks(t, "Apply of the fleet merge", next.Shards, want)
	if len(next.Fragments) != len(cur.Fragments)+len(added) {
		t.Fatalf("Apply of the fleet merge: %d fragments on %d, adding %d", len(next.Fragments), len(cur.Fragments), len(added))
	}
}

// Whoever merges the same generations a second time — the owner, a fleet
// merge from an older read, a fleet merge taking one more generation —
// adds only what the table's watermarks do not cover.
func TestASecondMergeOfTheSameGenerationsAddsNothing(t *testing.T) {
	b := open(t, "mem://")
	createIDTable(t, b)
	a1, a2, a3 := generation(t, b, "a", 1, 1, 1), generation(t, b, "a", 2, 1, 2), generation(t, b, "a", 3, 1, 3)
	b1 := generation(t, b, "b", 1, 1, 11)
	c1 := generation(t, b, "c", 1, 1, 21)
	first := format.Transaction{Kind: format.KindMerge, ReadVersion: 1,
		Merges: []format.ShardMerge{{Shard: "a", Watermark: 2, Epoch: 1}, {Shard: "b", Watermark: 1, Epoch: 1}},
		Added:  []format.Fragment{a1, a2, b1}}
	if _, err := commit.Commit(ctx, b, nil, first, nil); err != nil {
		t.Fatal(err)
	}
	// The same fleet merge again, read at version 1: the table covers it.
	again := first
	again.CommitID = ""
	res, err := commit.Commit(ctx, b, nil, again, nil)
	if err != nil || !res.Done {
		t.Fatalf("a fleet merge of generations already merged: %+v, %v", res, err)
	}
	// The owner's merge of a's first two generations: done too.
	res, err = commit.Commit(ctx, b, nil, format.Transaction{Kind: format.KindMerge, ReadVersion: 1, Shard: "a", Watermark: 2, Epoch: 1,
		Added: []format.Fragment{a1, a2}}, nil)
	if err != nil || !res.Done {
		t.Fatalf("an owner's merge of generations already merged: %+v, %v", res, err)
	}
	// A fleet merge read at version 1 that takes a further: only a's third
	// generation and c's join, and every mark moves.
	wider := format.Transaction{Kind: format.KindMerge, ReadVersion: 1,
		Merges: []format.ShardMerge{{Shard: "a", Watermark: 3, Epoch: 1}, {Shard: "b", Watermark: 1, Epoch: 1}, {Shard: "c", Watermark: 1, Epoch: 1}},
		Added:  []format.Fragment{a1, a2, a3, b1, c1}}
	if res, err = commit.Commit(ctx, b, nil, wider, nil); err != nil || res.Done {
		t.Fatalf("a wider fleet merge: %+v, %v", res, err)
	}
	sameMarks(t, "after the wider merge", marks(t, b), map[string]format.ShardMark{
		"a": {Watermark: 3, Epoch: 1}, "b": {Watermark: 1, Epoch: 1}, "c": {Watermark: 1, Epoch: 1}})
	sameIDs(t, b, 1, 2, 3, 11, 21)
}

// A merge from an epoch older than the table's mark for its shard — a
// fenced owner's — is refused and adds nothing.
func TestAMergeFromAFencedEpochIsRefused(t *testing.T) {
	b := open(t, "mem://")
	createIDTable(t, b)
	if _, err := commit.Commit(ctx, b, nil, format.Transaction{Kind: format.KindMerge, Shard: "a", Watermark: 1, Epoch: 2,
		Added: []format.Fragment{generation(t, b, "a", 1, 2, 1)}}, nil); err != nil {
		t.Fatal(err)
	}
	old := generation(t, b, "a", 2, 1, 2)
	_, err := commit.Commit(ctx, b, nil, format.Transaction{Kind: format.KindMerge, Shard: "a", Watermark: 2, Epoch: 1,
		Added: []format.Fragment{old}}, nil)
	var ce *commit.ConflictError
	if !errors.As(err, &ce) || commit.IsRetryableConflict(err) {
		t.Fatalf("a merge from epoch 1 after epoch 2 merged: %v, want a conflict that is not retried", err)
	}
	sameMarks(t, "after the fenced merge", marks(t, b), map[string]format.ShardMark{"a": {Watermark: 1, Epoch: 2}})
	sameIDs(t, b, 1)
}
