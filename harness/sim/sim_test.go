package sim

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
)

var (
	seeds = flag.Int("sim.seeds", 300, "seeds in the campaign")
	start = flag.Uint64("sim.start", 1, "first seed of the campaign")
	steps = flag.Int("sim.steps", 100, "top-level operations per seed")
	lines = flag.Int("sim.lines", 80, "trace lines printed for a failing seed")
)

// The campaign: a bounded run of seeds in CI (the same seeds every time,
// so it cannot fail by chance), a long one with -sim.seeds and
// -sim.start, or with cmd/strata-sim. A failure names its seed and prints
// the operations that led there; -sim.start=N -sim.seeds=1 replays it.
func TestCampaign(t *testing.T) {
	c, err := Campaign(context.Background(), CampaignConfig{Start: *start, Seeds: *seeds, Steps: *steps})
	if err != nil {
		t.Fatal(err)
	}
	if v := c.Failed; v != nil {
		t.Fatalf("%v\nreplay: go test ./harness/sim -run TestCampaign -sim.start=%d -sim.seeds=1 -sim.steps=%d -v\n%s",
			v, v.Seed, *steps, tail(v.Trace, *lines))
	}
	t.Logf("seeds %d..%d: %v", *start, *start+uint64(*seeds)-1, c)
}

// A seed replays: two runs print the same trace.
func TestSeedReplays(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		a, _ := Run(context.Background(), Config{Seed: seed, Steps: *steps})
		b, _ := Run(context.Background(), Config{Seed: seed, Steps: *steps})
		if d := firstDifference(a.Trace, b.Trace); d >= 0 {
			t.Errorf("seed %d: runs differ from line %d:\n%s\n%s", seed, d, at(a.Trace, d), at(b.Trace, d))
		}
	}
}

func firstDifference(a, b []string) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(end)"
}

func tail(lines []string, n int) string {
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("… %d earlier lines", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// Seeds that found a defect once (in the engine or in an oracle) run on
// every test: each must pass. The engine's fixes they pin: 184 (changes
// of a commit taken back that was readable), 9238 (a follower inside the
// window of a commit taken back), 13 (an upsert that stalled, its deletes
// delivered before its missing rows), 71557 (the taking back of a
// collected compaction), 81096 (an upsert taken back twice by repair),
// 100082 (a named append sent again after a column was added, refused as
// other rows: its digest covered the schema), 400258 (the taking back of
// an upsert whose data was collected, stuck for good behind an update of
// a fragment it deleted from), 1047 (an append acknowledged at a version
// garbage collection had taken: its handle skipped the listing, taking
// its last commit for recent by when the call returned, not when it
// began), 6663 (the taking back of an upsert whose rows GC took, stuck
// for good behind a later upsert that replaced keys in its fragment),
// 14885 (the taking back of an upsert whose rows GC took gave back a row
// of a key a later merge of a shard's upserts had replaced: the key twice),
// 20156 (a delete of a whole fragment whose vector GC took during its
// stall: scans read it as deleted, changes as never readable, so a
// follower missed the rows its taking back gave again), 21680 (an upsert
// whose vectors on two fragments GC took, taken back twice by one repair:
// the second failed reading the vector that was gone, and every repair
// after it the same, the shard's merges stuck for good), 4987 (a named
// append sent again from a handle whose newest version, and the one after
// it, a collection had taken was told "stored" at a version that had taken
// it back: its rows lost); and six that the retirement of quiet shards met
// while it was built: 72 (a fenced owner's flush wrote a state into a
// retired shard), 112 (a retirement cut short after the states went,
// before the WAL), 448 (a shard whose newest claim the table did not
// record, retired, claimed again at the same epoch), 2885 (an append
// paused between its check and its write left an entry in a retired
// shard, and no owner could open it again), 5489 (a retirement cut short
// left an owner that woke its claim: it wrote into a shard without
// states), 13379 (a shard retired twice, its claims gone after the first:
// the second collector claimed its live owner's own epoch, and the owner,
// not fenced, wrote on); and 26262 (an owner quiet a day, which had read
// the claims just before its shard was retired, acknowledged an entry
// written after it without reading them again: no owner could open the
// shard past it), 31138 (a version collected, created again by a writer
// stalled past the collection that died before deleting it, read by
// number as the version a reader had pinned, with other rows), 46842 (a
// fresh read of the fleet read a shard's state, then listed its log after
// a flush, a merge and their clean-up: the rows were in neither), 66696
// (a retirement cut short emptied a log, a new owner fenced it low, and
// the fenced owner's unacknowledged entry above left a gap no owner could
// open past), 82634 (a merge of upserts stalled past a collection, which
// took its deletion vector, and died once its manifest landed: the table
// read nowhere, and merges failed until a collection's repair), 141389
// and 141474 (a shard's new state numbered from a lagging listing's older
// one), 142900 (an opening owner took a merge of its own new state for a
// hole), 145535 (an owner paused mid-open across a retirement fenced
// above the new owner's entries), 147710 (a flush that landed unseen,
// merged while the memtable held its rows), 158704 (an upsert taken back
// after a compaction rewrote a fragment it deleted from: the take-back
// failed for good), 189624 (a retry that stalled past the window stored
// its append again), 11063 (two copies of a named append 12 ms apart,
// another producer's append two hours later between them in a fresh
// read's order: the window applied at its time forgot the first copy,
// and the second was read too), 42698, 50498 and 56722 (copies of a
// retried append in two shards merged back to back hours after the
// append: the first merge recorded the name at the append's time, and the
// window applied in the same commit forgot it); 86108 (a fresh read of the
// fleet listed the table's versions, then a fleet merge took a shard's
// last rows and a collection retired the shard: it read the older version
// and the shard as empty, and the rows were in neither).
func TestSeedsThatFoundDefects(t *testing.T) {
	for _, seed := range []uint64{13, 184, 9238, 21073, 41430, 62020, 71557, 81096, 91758, 100082, 400258, 1047, 6663, 14885, 20156, 21680, 72, 112, 448, 2885, 5489, 13379, 4987, 26262, 31138, 46842, 66696, 82634, 141389, 141474, 142900, 145535, 147710, 158704, 189624, 222, 6376, 6971, 11063, 42698, 50498, 56722, 83845, 86108} {
		if _, err := Run(context.Background(), Config{Seed: seed, Steps: 100}); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
}
