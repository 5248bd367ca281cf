package compactor_test

import (
	"sync"
	"testing"

	"github.com/stratadb/strata/compactor"
)

// A compaction tells its progress by the bytes of its sources as it reads
// them, against the plan's total, many times for a run, never going back,
// and reaching the total.
func TestVolumeCompactionTellsItsProgressByBytes(t *testing.T) {
	for _, recode := range []bool{false, true} {
		b := rolloutsTable(t, "mem://", 1, 40, 500)
		var mu sync.Mutex
		var calls int
		var last, total int64
		res, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, &compactor.Options{Recode: recode,
			OnProgress: func(done, all int64) {
				mu.Lock()
				defer mu.Unlock()
				if done < last {
					t.Errorf("progress went back from %d to %d", last, done)
				}
				calls, last, total = calls+1, done, all
			}})
		if err != nil {
			t.Fatal(err)
		}
		if total != res.BytesRewritten || total == 0 {
			t.Fatalf("recode %v: told a total of %d bytes, the run rewrote %d", recode, total, res.BytesRewritten)
		}
		if last < total || calls < 40 {
			t.Fatalf("recode %v: told %d of %d bytes in %d calls", recode, last, total, calls)
		}
	}
}
