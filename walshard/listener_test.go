package walshard_test

import (
	"errors"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/walshard"
)

// A flush that waits for merges to take generations (MaxPendingGenerations
// reached) is a write stall, told to the listener once the wait ends,
// with its reason and how long it lasted. Before, a stall was told to no
// one: an operator saw appends slow down and nothing said why.
func TestAFlushWaitingForMergesIsAWriteStallTold(t *testing.T) {
	b := newTable(t, "mem://")
	var mu sync.Mutex
	var stalls []walshard.StallInfo
	s := open(t, b, "w1", walshard.Options{MaxPendingGenerations: 1, Listener: walshard.Listener{WriteStall: func(i walshard.StallInfo) {
		mu.Lock()
		defer mu.Unlock()
		stalls = append(stalls, i)
	}}})
	defer s.Close()
	appendIDs(t, s, 1, 2)
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	appendIDs(t, s, 3)
	flushed := make(chan error, 1)
	go func() { _, err := s.Flush(ctx); flushed <- err }()
	select {
	case err := <-flushed:
		t.Fatalf("a flush past MaxPendingGenerations did not wait for a merge: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(stalls) != 1 || stalls[0].Reason != walshard.StallGenerations || stalls[0].Shard != "w1" || stalls[0].Duration < 100*time.Millisecond || stalls[0].Err != nil {
		t.Fatalf("stalls told: %+v, want one of w1, %q, of at least 100ms, ended well", stalls, walshard.StallGenerations)
	}
}

// errDenied is a store's refusal that no retry cures.
var errDenied = errors.New("access denied")

// An idle shard whose keep-alive cannot write its state tells the
// listener, each time, and tries again at the next tick. Before, the
// flush loop dropped the error: garbage collection could later retire a
// live shard whose owner never said it could not write.
func TestAFailedKeepAliveIsToldNotDropped(t *testing.T) {
	mem := newTable(t, "mem://")
	var failing atomic.Bool
	b := fault.Wrap(mem, fault.OnKeys(regexp.MustCompile(`^_fleet/flush/`), fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if failing.Load() && op != fault.OpList && op != fault.OpGet {
			return fault.Fault{Action: fault.Fail, Err: errDenied}
		}
		return fault.Fault{}
	})))
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	told := make(chan error, 16)
	s := open(t, b, "w1", walshard.Options{FlushInterval: 20 * time.Millisecond, Commit: commit.Options{Now: now},
		Listener: walshard.Listener{BackgroundError: func(what string, err error) {
			if what == "keep-alive" {
				select {
				case told <- err:
				default:
				}
			}
		}}})
	defer s.Close()
	appendIDs(t, s, 1)
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	skew.Store(int64(walshard.KeepAliveEvery + time.Minute))
	select {
	case err := <-told:
		if !errors.Is(err, errDenied) {
			t.Fatalf("the keep-alive's failure told: %v, want the store's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a keep-alive that cannot write its state told nothing in 10s")
	}
}
