package walshard_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
)

// fleetOfFlushes opens shards shards that each flush gens generations of
// rows rows, and returns the ids they wrote and the largest flush object.
func fleetOfFlushes(t *testing.T, b blob.Bucket, shards, gens, rows int) (want []int64, largest int64) {
	t.Helper()
	for i := range shards {
		s := open(t, b, fmt.Sprintf("w%d", i), walshard.Options{})
		for g := range gens {
			ids := seq(int64(i*1_000_000+g*rows), int64(rows))
			appendIDs(t, s, ids...)
			want = append(want, ids...)
			if _, err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for o, err := range blob.List(ctx, b, format.FleetFlushDir, 0) {
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, o.Size)
	}
	return want, largest
}

// A fleet merge within a memory budget a few flush objects large holds
// no more than the budget at once by its own count, and still merges
// every shard's rows once, in several passes of one call: the shards the
// budget has no room for wait for the next pass, and the states of those
// it cannot keep are read from their objects' tails.
func TestAFleetMergeHoldsToItsMemoryBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		decode bool // a column added after the flushes: every row is decoded
	}{{"pages copied", false}, {"decoded", true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTable(t, "mem://")
			want, largest := fleetOfFlushes(t, b, 6, 3, 2000)
			if tc.decode {
				tb, err := commit.OpenTable(ctx, b, nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.AddColumn, Column: "grade", Type: arrow.PrimitiveTypes.Int64}); err != nil {
					t.Fatal(err)
				}
			}
			before, err := table.LatestVersion(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			budget := 6 * largest
			if tc.decode {
				budget = 64 * largest
			}
			c0, _ := blob.StatsOf(b)
			res, err := fleetmerge.Merge(ctx, b, &fleetmerge.Options{MemoryBudget: budget})
			c1, _ := blob.StatsOf(b)
			if err != nil || res.Generations != 18 || res.Rows != int64(len(want)) {
				t.Fatalf("fleet merge within %d bytes: %+v %v", budget, res, err)
			}
			if res.PeakMemory <= 0 || res.PeakMemory > budget {
				t.Fatalf("peak memory %d, want within the budget %d", res.PeakMemory, budget)
			}
			after, err := table.LatestVersion(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if after-before < 2 {
				t.Fatalf("18 generations of %d bytes each merged in %d commits within %d bytes", largest, after-before, budget)
			}
			if tails := c1.Sub(c0).RangeGets; !tc.decode && tails == 0 {
				t.Fatalf("six shards' newest flush objects, of %d bytes, all read whole within %d bytes", largest, budget)
			}
			exactlyOnce(t, baseIDs(t, b), want)
		})
	}
}

// Without a budget a pass holds every flush object it reads, and merges
// them in one commit; a budget smaller than one flush object still
// merges everything, a shard at a time.
func TestAFleetMergeBelowOneFlushObjectTakesOneShardAtATime(t *testing.T) {
	b := newTable(t, "mem://")
	want, largest := fleetOfFlushes(t, b, 3, 1, 2000)
	before, err := table.LatestVersion(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	res, err := fleetmerge.Merge(ctx, b, &fleetmerge.Options{MemoryBudget: largest / 2})
	if err != nil || res.Generations != 3 {
		t.Fatalf("fleet merge within half a flush object: %+v %v", res, err)
	}
	if after, _ := table.LatestVersion(ctx, b); after-before != 3 {
		t.Fatalf("3 shards merged in %d commits, want one each", after-before)
	}
	exactlyOnce(t, baseIDs(t, b), want)
}

// unreadableTails is a store that fails every ranged read of a flush
// object as an overloaded store does (503 SlowDown: retryable).
type unreadableTails struct{ blob.Bucket }

func (u unreadableTails) NewRangeReader(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if strings.HasPrefix(key, format.FleetFlushDir) {
		return nil, fmt.Errorf("%w: SlowDown on %s", blob.ErrRetryable, key)
	}
	return u.Bucket.NewRangeReader(ctx, key, off, n)
}

// A state read from a flush object's tail that the store fails to serve
// is the store's retryable error, never "corrupt": those shards wait for
// a later pass, the others merge, and nothing is lost.
func TestAFleetMergeWhoseTailReadsFailSaysTheStoreFailed(t *testing.T) {
	b := newTable(t, "mem://")
	want, largest := fleetOfFlushes(t, b, 4, 1, 2000)
	res, err := fleetmerge.Merge(ctx, unreadableTails{b}, &fleetmerge.Options{MemoryBudget: 3 * largest})
	if err == nil || !blob.IsRetryable(err) || strings.Contains(err.Error(), "corrupt") || len(res.Failed) == 0 || res.Shards == 0 {
		t.Fatalf("a pass whose tail reads fail: %+v %v", res, err)
	}
	if _, err := fleetmerge.Merge(ctx, b, &fleetmerge.Options{MemoryBudget: 3 * largest}); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, b), want)
}
