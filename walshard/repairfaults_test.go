package walshard_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/walshard"
)

// A repair of a log that lost entries, run through a store that fails
// requests, loses answers to writes and makes the repairing process die
// at random points, run again until it completes: every row of the entries
// that were not lost ends up in the table once, none twice, and the shard
// opens afterwards without the option.
func TestARepairCutShortAtAnyPointCompletesWhenRunAgain(t *testing.T) {
	failedAttempts, attempts := 0, 0
	defer func() { t.Logf("%d repair attempts cut short, over 60 logs", failedAttempts) }()
	for seed := range uint64(60) {
		b := newTable(t, "mem://")
		s := open(t, b, "w1", walshard.Options{})
		for i := range int64(6) { // positions 2…7
			appendIDs(t, s, 10*i, 10*i+1)
		}
		s.Close()
		// Reopened and closed: a fence at 8. With the entry at 7 lost, only
		// what the repair leaves there lets a later open past it.
		open(t, b, "w1", walshard.Options{}).Close()
		for _, pos := range []uint64{3, 7} { // ids 10, 11 and 50, 51
			if err := b.Delete(ctx, walKey("w1", pos)); err != nil {
				t.Fatal(err)
			}
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		var mu sync.Mutex
		fb := fault.Wrap(b, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
			mu.Lock()
			defer mu.Unlock()
			switch rng.IntN(100) {
			case 0:
				return fault.Fault{Action: fault.Fail}
			case 1:
				return fault.Fault{Action: fault.LoseResponse}
			case 2:
				return fault.Fault{Action: fault.Crash}
			}
			return fault.Fault{}
		}))
		done := false
		for n := range 200 {
			attempts = n + 1
			fb.Revive()
			_, err := walshard.Adopt(ctx, fb, "w1", &walshard.Options{SetAsideLost: true, ResolveWithin: -1})
			if err == nil {
				done = true
				break
			}
			if !errors.Is(err, fault.ErrInjected) && !errors.Is(err, fault.ErrCrashed) && !errors.Is(err, walshard.ErrFenced) &&
				!errors.Is(err, walshard.ErrAppendUnknown) && !errors.Is(err, walshard.ErrMergeRunning) {
				t.Logf("seed %d: repair attempt: %v", seed, err)
			}
		}
		if !done {
			t.Fatalf("seed %d: the repair never completed", seed)
		}
		failedAttempts += attempts - 1
		exactlyOnce(t, baseIDs(t, b), []int64{0, 1, 20, 21, 30, 31, 40, 41})
		open(t, b, "w1", walshard.Options{}).Close()
	}
}
