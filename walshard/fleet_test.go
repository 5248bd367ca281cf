package walshard_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

// Many shards' flushed generations go into the table in one commit, each
// shard's watermark moving in it; the owners learn the new watermark at
// their next flush and clean their logs; a second pass adds what they
// flushed since, and nothing twice.
func TestFleetMergeCommitsManyShardsOnce(t *testing.T) {
	b := newTable(t, "mem://")
	var shards []*walshard.Shard
	var want []int64
	for i := range 8 {
		s := open(t, b, fmt.Sprintf("w%d", i), walshard.Options{})
		defer s.Close()
		ids := seq(int64(i*100), 5)
		appendIDs(t, s, ids...)
		want = append(want, ids...)
		if _, err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		shards = append(shards, s)
	}
	before, _ := table.LatestVersion(ctx, b)
	res, err := walshard.FleetMerge(ctx, b, nil)
	if err != nil || res.Shards != 8 || res.Generations != 8 || res.Rows != 40 {
		t.Fatalf("fleet merge: %+v %v", res, err)
	}
	if after, _ := table.LatestVersion(ctx, b); after != before+1 {
		t.Fatalf("one pass made %d commits", after-before)
	}
	exactlyOnce(t, baseIDs(t, b), want)
	// Nothing announced now: one LIST, nothing else.
	c0, _ := blob.StatsOf(b)
	if res, err := walshard.FleetMerge(ctx, b, nil); err != nil || res.Version != 0 {
		t.Fatalf("idle pass: %+v %v", res, err)
	}
	if c1, _ := blob.StatsOf(b); c1.Sub(c0).Requests() != 1 {
		t.Fatalf("an idle fleet merge made %d requests", c1.Sub(c0).Requests())
	}
	// The owners go on; one merges on its own while a pass runs.
	for i, s := range shards {
		ids := seq(int64(i*100+50), 3)
		appendIDs(t, s, ids...)
		want = append(want, ids...)
		if _, err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if st := s.Stats(); st.Watermark != 1 || st.PendingGenerations != 1 {
			t.Fatalf("shard %d after a fleet merge and a flush: %+v", i, st)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := shards[3].Merge(ctx); err != nil {
			t.Error(err)
		}
	})
	wg.Go(func() {
		if _, err := walshard.FleetMerge(ctx, b, nil); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()
	if _, err := walshard.FleetMerge(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, b), want)
	for _, s := range shards {
		if err := s.Drain(ctx); err != nil {
			t.Fatal(err)
		}
	}
	exactlyOnce(t, baseIDs(t, b), want)
	for o, err := range blob.List(ctx, b, table.FleetPendingDir, 0) {
		if err != nil {
			t.Fatal(err)
		}
		t.Fatalf("announcement %s left after every generation merged", o.Key)
	}
}

// Two fleet merges over the same generations at once: one adds them, the
// other finds nothing left; a shard fenced by a newer owner is left to it.
func TestTwoFleetMergesAtOnceAddEachGenerationOnce(t *testing.T) {
	b := newTable(t, "mem://")
	var want []int64
	for i := range 6 {
		s := open(t, b, fmt.Sprintf("w%d", i), walshard.Options{})
		for g := range 3 {
			ids := seq(int64(i*100+g*10), 4)
			appendIDs(t, s, ids...)
			want = append(want, ids...)
			if _, err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, err := walshard.FleetMerge(ctx, b, &walshard.FleetOptions{MaxGenerations: 2}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for {
		res, err := walshard.FleetMerge(ctx, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Version == 0 {
			break
		}
	}
	exactlyOnce(t, baseIDs(t, b), want)
}
