package walshard_test

import (
	"context"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
)

// shardLook is what later sweeps must leave as the adoption left it.
type shardLook struct {
	epoch, lag, flushed uint64
}

func lookAt(t *testing.T, b blob.Bucket, id string) shardLook {
	t.Helper()
	st, err := walshard.Inspect(ctx, b, id)
	if err != nil {
		t.Fatal(err)
	}
	return shardLook{st.Epoch, st.WALLag, st.WALFlushed}
}

// A shard adopted once is adopted no more while nothing new is written to
// it: however far past the adoption age, sweeps do not find it, and
// neither they nor fleet merges make a request of it; its epoch, its
// flushed position and its lag (none) stay. A new owner that writes to it
// and dies has it found again. Before, the adopter's fence stayed above
// the flushed position: every sweep past the age found the shard with
// entries to replay, and each adoption claimed an epoch and placed one
// more fence, the lag growing by one.
func TestAnAdoptedShardIsNotFoundAgain(t *testing.T) {
	b := newTable(t, "mem://")
	dead := open(t, b, "pod-1", walshard.Options{})
	appendIDs(t, dead, 1, 2)
	if _, err := dead.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	appendIDs(t, dead, 3)
	dead.Close() // dies with a generation unmerged and an entry unflushed
	now := time.Now().Add(time.Hour)
	found, err := walshard.FindAbandoned(ctx, b, time.Minute, now)
	if err != nil || len(found) != 1 {
		t.Fatalf("before the adoption: %+v %v", found, err)
	}
	res, err := walshard.Adopt(ctx, b, "pod-1", &walshard.Options{})
	if err != nil || !res.Retired {
		t.Fatalf("adopt: %+v %v", res, err)
	}
	exactlyOnce(t, baseIDs(t, b), []int64{1, 2, 3})
	adopted := lookAt(t, b, "pod-1")
	if adopted.lag != 0 {
		t.Fatalf("after the adoption: %+v, want no lag", adopted)
	}
	var costs []int64
	mem := &fleetmerge.Memory{}
	fo := &fleetmerge.Options{Memory: mem, Commit: commit.Options{Now: func() time.Time { return now }}}
	for i := range 4 {
		now = now.Add(time.Hour)
		before, _ := blob.StatsOf(b)
		found, err := walshard.FindAbandoned(ctx, b, time.Minute, now)
		if err != nil || len(found) != 0 {
			t.Fatalf("sweep %d after the adoption: %+v %v", i+1, found, err)
		}
		if res, err := fleetmerge.Merge(ctx, b, fo); err != nil || res.Version != 0 {
			t.Fatalf("fleet merge %d after the adoption: %+v %v", i+1, res, err)
		}
		after, _ := blob.StatsOf(b)
		costs = append(costs, after.Sub(before).Requests())
		if got := lookAt(t, b, "pod-1"); got != adopted {
			t.Fatalf("sweep %d after the adoption: %+v, want %+v", i+1, got, adopted)
		}
	}
	// A sweep: the manifest (a LIST and a GET), the registered shards (a
	// LIST, empty) and the flush objects (a LIST); a fleet merge: a LIST
	// of announcements, empty, and one of flush objects, once the first
	// merge deleted those the adoption merged.
	for _, c := range costs[1:] {
		if c != 6 {
			t.Fatalf("requests of a sweep and a fleet merge after the adoption: %v, want 6 each after the first", costs)
		}
	}
	back := open(t, b, "pod-1", walshard.Options{})
	appendIDs(t, back, 4)
	back.Close()
	found, err = walshard.FindAbandoned(ctx, b, time.Minute, now.Add(time.Hour))
	if err != nil || len(found) != 1 || found[0].Shard != "pod-1" {
		t.Fatalf("a new owner's rows: %+v %v", found, err)
	}
	if _, err := walshard.Adopt(ctx, b, "pod-1", &walshard.Options{}); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, b), []int64{1, 2, 3, 4})
}

// An adopter takes a shard's registration down once the shard holds
// nothing; a new owner that opened the shard meanwhile, its registration
// among what the adopter took down, is seen, and the registration is put
// back: its rows are found when it dies.
func TestARetirementMeetingANewOwnerKeepsTheShardFound(t *testing.T) {
	under := newTable(t, "mem://")
	dead := open(t, under, "pod-1", walshard.Options{})
	appendIDs(t, dead, 1)
	dead.Close()
	var newOwner atomic.Pointer[walshard.Shard]
	fb := fault.Wrap(under, fault.OnOps(fault.OnKeys(regexp.MustCompile(`^_fleet/shards/pod-1$`), fault.InjectorFunc(func(fault.Op, string) fault.Fault {
		// Just before the adopter deletes the registration, a new owner
		// opens the shard (and registers it).
		if newOwner.Load() == nil {
			s, err := walshard.Open(context.Background(), under, &walshard.Options{Shard: "pod-1"})
			if err != nil {
				t.Error(err)
				return fault.Fault{}
			}
			newOwner.Store(s)
		}
		return fault.Fault{}
	})), fault.OpDelete))
	res, err := walshard.Adopt(ctx, fb, "pod-1", &walshard.Options{})
	if err != nil || res.Retired || newOwner.Load() == nil {
		t.Fatalf("adopt: %+v %v; want the shard kept registered for its new owner", res, err)
	}
	s := newOwner.Load()
	appendIDs(t, s, 2)
	s.Close() // dies
	found, err := walshard.FindAbandoned(ctx, under, time.Minute, time.Now().Add(time.Hour))
	if err != nil || len(found) != 1 || found[0].Shard != "pod-1" {
		t.Fatalf("the new owner's rows: %+v %v", found, err)
	}
	if _, err := walshard.Adopt(ctx, under, "pod-1", &walshard.Options{}); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, under), []int64{1, 2})
}
