package walshard_test

// What package walshard promises (its doc comment, the doc comments of
// Shard.ScanFresh and ScanFleet, and DESIGN's invariants 3 and 5), and the
// test that pins each:
//
//   - Append returns once the rows are durable in a WAL entry; concurrent
//     appends are grouped into one entry:
//     TestConcurrentAppendsShareWALEntries; an append whose outcome the
//     store hides waits for it: TestAnAppendWaitsForTheStoreToTellItsOutcome.
//   - Every acknowledged append is stored exactly once — in the WAL, a
//     generation or the base table: TestAppendFlushMergeMovesRowsIntoTheTableOnce,
//     TestVolumeCrashAtEveryPointLosesAndDoublesNothing,
//     TestSIGKILLedWorkersLoseNothingFile, TestSIGKILLedWorkersLoseNothingMinIO,
//     TestFourShardsFile, TestFourShardsMinIO,
//     TestTheNextAppendTakesInAnEntryThatLandedUnseen,
//     TestARetryIntoACleanedPositionIsNotAcknowledged.
//   - Replay on open reads the WAL entries above the flushed position, by
//     name: TestReopenReplaysWhatWasNotFlushed,
//     TestReplayDoesNotTrustALaggingListing, TestReusedEntriesReplay.
//   - Merging is exactly-once: the watermark moves in the manifest that
//     adds the rows, and a second merge of the same generations is a no-op:
//     TestAppendFlushMergeMovesRowsIntoTheTableOnce,
//     TestFleetMergeCommitsManyShardsOnce,
//     TestTwoFleetMergesAtOnceAddEachGenerationOnce,
//     TestRewriteAndMergeRunTogether (and, in package commit,
//     TestAFleetMergeMovesEveryShardsWatermarkInTheManifestThatAddsItsRows).
//   - A fenced writer can do no harm — its next WAL or state write
//     collides; the fence outlives cleanup; an owner paused past the
//     cleanup is fenced too: TestAFencedWriterCanDoNoHarm,
//     TestStaleMergeFromAnOlderEpochIsRefusedByTheTable,
//     TestAPausedOwnerIsNotAcknowledgedAfterTheNewerOneCleanedUp,
//     TestAnOwnerWhoseClockRunsAheadKeepsItsFence.
//   - A WAL entry that is a part of a generation is deleted only by garbage
//     collection, once no kept version references it: TestReuseLargeEntries,
//     TestReuseLargeEntriesMinIO.
//   - A shard that may hold rows outside the table is registered; only an
//     adopter that left it empty takes the registration down, and puts it
//     back if a newer epoch was claimed; an adopted shard is adopted once:
//     TestAnAdoptedShardIsNotFoundAgain,
//     TestARetirementMeetingANewOwnerKeepsTheShardFound,
//     TestAnAbandonedShardIsAdopted.
//   - No object is overwritten: TestNoShardObjectIsOverwritten.
//   - ScanFresh gives every row the handle acknowledged, once:
//     TestFourShardsFile, TestFourShardsMinIO,
//     TestFreshReadFindsRowsAFleetMergeTookThroughALaggingListing.
//   - ScanFleet gives every row acknowledged before it began, once, whoever
//     wrote it: TestAFleetFreshReadSeesEveryAcknowledgedRowOnce,
//     TestAFleetReadRacingAnAdoptionSeesTheAdoptedRows.
//   - A missing or damaged WAL entry is a typed error, a poisoned one is
//     quarantined, and repairs set them aside: TestAMissingWALEntryIsAnError,
//     TestAPoisonedWALEntryIsQuarantined, TestDamagedFragmentEntry,
//     TestAnEntryWhosePayloadClaimsAHugeBodyIsCorrupt,
//     TestARepairSetsAsideLostWALEntries, TestARepairSetsAsideACorruptWALEntry,
//     TestARepairCutShortAtAnyPointCompletesWhenRunAgain.
//   - Appends wait when the memtable is full: TestAppendsWaitWhenTheMemtableIsFull.
//   - Idempotent appends: the list at the top of idempotent_test.go.
//   - Options: TestOptionsDefaultsAndValidate; bad input is refused by
//     name: TestBadInput.

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
)

// beforeManifestRead runs fn once, just before the first read of a
// manifest made through it.
type beforeManifestRead struct {
	blob.Bucket
	once sync.Once
	fn   func()
}

func (h *beforeManifestRead) hook(key string) {
	if strings.HasPrefix(key, format.VersionsDir) {
		h.once.Do(h.fn)
	}
}

func (h *beforeManifestRead) Get(ctx context.Context, key string) ([]byte, error) {
	h.hook(key)
	return h.Bucket.Get(ctx, key)
}

func (h *beforeManifestRead) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	h.hook(key)
	return h.Bucket.NewRangeReader(ctx, key, off, n)
}

// A fresh read of the fleet that lists the newest version, then, before it
// reads that manifest, meets an adoption that merges a shard's rows into
// a newer version and retires the emptied shard's registration, still
// sees those rows: acknowledged before the read began, they are in it.
func TestAFleetReadRacingAnAdoptionSeesTheAdoptedRows(t *testing.T) {
	b := newTable(t, "mem://")
	owner := open(t, b, "pod-1", walshard.Options{})
	defer owner.Close()
	appendIDs(t, owner, 1, 2, 3)
	var adopted walshard.AdoptResult
	var adoptErr error
	racing := &beforeManifestRead{Bucket: b, fn: func() {
		adopted, adoptErr = walshard.Adopt(ctx, b, "pod-1", &walshard.Options{})
	}}
	seen := countIDs(t, walshard.ScanFleet(ctx, racing, table.ScanOptions{}))
	if adoptErr != nil || !adopted.Retired || adopted.Rows != 3 {
		t.Fatalf("the racing adoption: %+v, %v", adopted, adoptErr)
	}
	exactlyOnce(t, seen, []int64{1, 2, 3})
}

// overwrites is a bucket that fails the test on a write that lands on an
// object that exists (a successful Put or PutIfAbsent of a live key).
type overwrites struct {
	blob.Bucket
	t      *testing.T
	mu     sync.Mutex
	live   map[string]bool
	writes int
}

func watchOverwrites(t *testing.T, b blob.Bucket) *overwrites {
	o := &overwrites{Bucket: b, t: t, live: map[string]bool{}}
	for obj, err := range blob.List(ctx, b, "", 0) {
		if err != nil {
			t.Fatal(err)
		}
		o.live[obj.Key] = true
	}
	return o
}

func (o *overwrites) wrote(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.live[key] {
		o.t.Errorf("%s was written over", key)
	}
	o.live[key] = true
	o.writes++
}

func (o *overwrites) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := o.Bucket.PutIfAbsent(ctx, key, data)
	if err == nil {
		o.wrote(key)
	}
	return err
}

func (o *overwrites) Put(ctx context.Context, key string, r io.Reader) error {
	err := o.Bucket.Put(ctx, key, r)
	if err == nil {
		o.wrote(key)
	}
	return err
}

func (o *overwrites) Delete(ctx context.Context, key string) error {
	err := o.Bucket.Delete(ctx, key)
	if err == nil {
		o.mu.Lock()
		delete(o.live, key)
		o.mu.Unlock()
	}
	return err
}

// An owner that appends, flushes (with entries written as fragments) and
// merges, a new owner that fences it, replays, flushes, merges and cleans
// up, the fenced owner trying again, a fleet merge and an adoption: none
// writes over an object that exists.
func TestNoShardObjectIsOverwritten(t *testing.T) {
	b := watchOverwrites(t, newTable(t, "mem://"))
	first := open(t, b, "a", walshard.Options{ReuseBytes: 1})
	appendIDs(t, first, 1, 2)
	appendIDs(t, first, 3)
	if _, err := first.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	appendIDs(t, first, 4)
	if _, err := first.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	appendIDs(t, first, 5)
	second := open(t, b, "a", walshard.Options{})
	defer second.Close()
	appendIDs(t, second, 6)
	if err := second.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := appendOnce(first, "a", 99); !errors.Is(err, walshard.ErrFenced) {
		t.Fatalf("the fenced owner's append: %v", err)
	}
	first.Close()
	other := open(t, b, "b", walshard.Options{})
	appendIDs(t, other, 10)
	if _, err := other.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	appendIDs(t, other, 11)
	if _, err := fleetmerge.Merge(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	other.Close()
	if _, err := walshard.Adopt(ctx, b, "b", &walshard.Options{}); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, b), []int64{1, 2, 3, 4, 5, 6, 10, 11})
	if b.writes < 20 {
		t.Fatalf("only %d writes watched", b.writes)
	}
}

// A fresh read of the fleet that reads a shard's state, then, before it
// lists the shard's WAL, meets that shard flushing, merging and cleaning
// up its log, still sees the shard's rows: it lists the log's end before
// it reads the state. Before, it found the log empty and the rows, in a
// version newer than the one it read, in neither (simulation seed 46842).
func TestAFleetReadRacingAFlushAndMergeSeesTheirRows(t *testing.T) {
	b := newTable(t, "mem://")
	owner := open(t, b, "pod-1", walshard.Options{})
	defer owner.Close()
	appendIDs(t, owner, 1, 2, 3)
	var once sync.Once
	var raceErr error
	racing := fault.Wrap(b, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if op == fault.OpGet && strings.HasPrefix(key, "_shards/pod-1/state/") {
			once.Do(func() {
				if _, raceErr = owner.Flush(ctx); raceErr == nil {
					_, raceErr = owner.Merge(ctx)
				}
			})
		}
		return fault.Fault{}
	}))
	seen := countIDs(t, walshard.ScanFleet(ctx, racing, table.ScanOptions{}))
	if raceErr != nil {
		t.Fatalf("the racing flush and merge: %v", raceErr)
	}
	exactlyOnce(t, seen, []int64{1, 2, 3})
}
