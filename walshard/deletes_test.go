package walshard_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

// A fleet merge takes down the hints it made stale — every merged
// shard's announcements and previous watermark record — in one request
// where the store deletes many objects at once, and leaves each shard
// its newest record, made when the watermark crosses a multiple of eight
// generations and only then.
func TestAFleetMergeTakesDownStaleHintsInOneRequest(t *testing.T) {
	b := newTable(t, "file://"+t.TempDir())
	const n = 24
	shards := make([]*walshard.Shard, n)
	var want []int64
	round := func(r, flushes int) {
		t.Helper()
		for i, s := range shards {
			for f := range flushes {
				ids := seq(int64(r*10_000+i*100+f*10), 3)
				appendIDs(t, s, ids...)
				want = append(want, ids...)
				if _, err := s.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		before, _ := blob.StatsOf(b)
		res, err := walshard.FleetMerge(ctx, b, nil)
		if err != nil || res.Shards != n {
			t.Fatalf("round %d: fleet merge %+v %v", r, res, err)
		}
		after, _ := blob.StatsOf(b)
		if d := after.Sub(before).Deletes; d != 1 {
			t.Fatalf("round %d: the fleet merge of %d shards made %d delete requests, want 1", r, n, d)
		}
	}
	records := func(s *walshard.Shard) []string {
		t.Helper()
		var keys []string
		for o, err := range blob.List(ctx, b, table.FleetMergedDir+s.ID()+"/", 0) {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, o.Key)
		}
		return keys
	}
	for i := range shards {
		shards[i] = open(t, b, fmt.Sprintf("w%02d", i), walshard.Options{})
		defer shards[i].Close()
	}
	round(0, 8)
	round(1, 8)
	exactlyOnce(t, baseIDs(t, b), want)
	for o, err := range blob.List(ctx, b, table.FleetPendingDir, 0) {
		if err != nil {
			t.Fatal(err)
		}
		t.Fatalf("announcement %s left after its generation merged", o.Key)
	}
	for _, s := range shards {
		if got := records(s); len(got) != 1 || got[0] != table.MergedKey(s.ID(), 16) {
			t.Fatalf("shard %s: merge records %q, want its newest (16) alone", s.ID(), got)
		}
	}
	// Merges that cross no multiple of eight record nothing.
	before, _ := blob.StatsOf(b)
	round(2, 1)
	after, _ := blob.StatsOf(b)
	d := after.Sub(before)
	if writes := d.Puts + d.CondPutsWon + d.CondPutsLost + d.CondPutsErr; writes != 4*n+1 {
		t.Fatalf("a round of an append and a flush a shard and a fleet merge made %d writes, want %d (an entry, a generation, a state and an announcement a shard, and the commit)", writes, 4*n+1)
	}
	for _, s := range shards {
		if got := records(s); len(got) != 1 || got[0] != table.MergedKey(s.ID(), 16) {
			t.Fatalf("shard %s: merge records %q after a merge to 17, want the one at 16", s.ID(), got)
		}
	}
	exactlyOnce(t, baseIDs(t, b), want)
}

// An owner deletes its old states several at a time, in one request
// each time: its folder holds a few more than the newest two, never more
// than a batch more.
func TestAnOwnerDeletesOldStatesInBatches(t *testing.T) {
	under := newTable(t, "file://"+t.TempDir())
	var stateDeletes atomic.Int64 // requests: a batch is decided once
	b := fault.Wrap(under, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if op == fault.OpDelete && strings.HasPrefix(key, table.ShardStatesDir("w")) {
			stateDeletes.Add(1)
		}
		return fault.Fault{}
	}))
	s := open(t, b, "w", walshard.Options{})
	defer s.Close()
	const flushes = 40
	most := 0
	for i := range flushes {
		appendIDs(t, s, int64(i))
		if _, err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, err := range blob.List(ctx, b, table.ShardStatesDir("w"), 0) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		most = max(most, n)
	}
	if d := stateDeletes.Load(); d == 0 || d > flushes/8+1 {
		t.Fatalf("%d requests deleted states over %d flushes, want at most one per 8", d, flushes)
	}
	if most > 2+8+1 {
		t.Fatalf("the states folder held %d states, want at most the newest two and a batch", most)
	}
	exactlyOnce(t, baseIDs(t, under), seq(0, flushes))
}

// A record left by a build that recorded every watermark goes when the
// next record is made, so that a shard keeps one.
func TestARecordOfAnEarlierBuildGoesWithTheNextRecord(t *testing.T) {
	b := newTable(t, "file://"+t.TempDir())
	s := open(t, b, "w", walshard.Options{})
	defer s.Close()
	var want []int64
	flushes := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			ids := seq(int64(i*10), 2)
			appendIDs(t, s, ids...)
			want = append(want, ids...)
			if _, err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if res, err := walshard.FleetMerge(ctx, b, nil); err != nil || res.Shards != 1 {
			t.Fatalf("fleet merge: %+v %v", res, err)
		}
	}
	records := func() []string {
		t.Helper()
		var keys []string
		for o, err := range blob.List(ctx, b, table.FleetMergedDir+"w/", 0) {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, o.Key)
		}
		return keys
	}
	flushes(0, 5)
	if got := records(); len(got) != 0 {
		t.Fatalf("records %q at watermark 5, want none", got)
	}
	if err := b.PutIfAbsent(ctx, table.MergedKey("w", 5), nil); err != nil {
		t.Fatal(err)
	}
	flushes(5, 3)
	if got := records(); len(got) != 1 || got[0] != table.MergedKey("w", 8) {
		t.Fatalf("records %q at watermark 8, want the one at 8 alone", got)
	}
	exactlyOnce(t, baseIDs(t, b), want)
}
