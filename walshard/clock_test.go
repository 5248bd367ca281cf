package walshard_test

import (
	"testing"
	"time"

	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/walshard"
)

// An owner whose clock runs ten minutes ahead of the store's keeps its
// fence through its own merge's cleanup: the fence must outlive a paused
// older owner's next write by five minutes of the store's time. Before,
// the fence looked ten minutes old and was deleted at the first merge, and
// an older owner waking within seconds could write at its position, below
// the new owner's flushed one, where no one reads: acknowledged and lost.
func TestAnOwnerWhoseClockRunsAheadKeepsItsFence(t *testing.T) {
	b := newTable(t, "mem://")
	ahead := func() time.Time { return time.Now().Add(10 * time.Minute) }
	s := open(t, b, "w1", walshard.Options{Commit: commit.Options{Now: ahead}})
	defer s.Close()
	appendIDs(t, s, 1, 2)
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Attributes(ctx, walKey("w1", 1)); err != nil {
		t.Fatalf("the owner's fence after its merge: %v", err)
	}
	exactlyOnce(t, baseIDs(t, b), []int64{1, 2})
}
