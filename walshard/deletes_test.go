package walshard_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
)

// A fleet merge deletes what it made stale — every shard's flush objects
// merged a while ago (a minute: a fresh read that began before the merge
// still finds them) and every merged shard's previous watermark record —
// in one request where the store deletes many objects at once, and leaves
// each shard its newest flush object and its newest record, made when the
// watermark crosses a multiple of sixteen generations and only then.
func TestAFleetMergeDeletesWhatItMadeStaleInOneRequest(t *testing.T) {
	b := newTable(t, "file://"+t.TempDir())
	const n = 24
	shards := make([]*walshard.Shard, n)
	var want []int64
	now := time.Now()
	fo := &fleetmerge.Options{Commit: commit.Options{Now: func() time.Time { return now }}}
	round := func(r, flushes int, later time.Duration, deletes int64) {
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
		now = now.Add(later)
		before, _ := blob.StatsOf(b)
		res, err := fleetmerge.Merge(ctx, b, fo)
		if err != nil || res.Shards != n {
			t.Fatalf("round %d: fleet merge %+v %v", r, res, err)
		}
		after, _ := blob.StatsOf(b)
		if d := after.Sub(before).Deletes; d != deletes {
			t.Fatalf("round %d: the fleet merge of %d shards made %d delete requests, want %d", r, n, d, deletes)
		}
	}
	list := func(dir string) []string { t.Helper(); return listKeys(t, b, dir) }
	for i := range shards {
		shards[i] = open(t, b, fmt.Sprintf("w%02d", i), walshard.Options{})
		defer shards[i].Close()
	}
	// The store's clock is the machine's; the merges' runs ahead.
	round(0, 8, 0, 0) // no record yet, and the flush objects are young
	for _, s := range shards {
		if got := list(format.FlushDir(s.ID())); len(got) != 9 {
			t.Fatalf("shard %s: flush objects %q, want the open's and eight flushes'", s.ID(), got)
		}
	}
	round(1, 8, 2*time.Minute, 1) // the flush objects merged (the first records, at 16, replace none)
	exactlyOnce(t, baseIDs(t, b), want)
	for _, s := range shards {
		if got := list(format.FleetMergedDir + s.ID() + "/"); len(got) != 1 || got[0] != format.MergedKey(s.ID(), 16) {
			t.Fatalf("shard %s: merge records %q, want its newest (16) alone", s.ID(), got)
		}
		if got := list(format.FlushDir(s.ID())); len(got) != 1 {
			t.Fatalf("shard %s: flush objects %q, want the newest alone", s.ID(), got)
		}
	}
	// Merges that cross no multiple of sixteen record nothing.
	before, _ := blob.StatsOf(b)
	round(2, 1, 2*time.Minute, 1)
	after, _ := blob.StatsOf(b)
	d := after.Sub(before)
	if writes := d.Puts + d.CondPutsWon + d.CondPutsLost + d.CondPutsErr; writes != 2*n+2 {
		t.Fatalf("a round of an append and a flush a shard and a fleet merge made %d writes, want %d (an entry and a flush object a shard, the merged rows and the commit)", writes, 2*n+2)
	}
	for _, s := range shards {
		if got := list(format.FleetMergedDir + s.ID() + "/"); len(got) != 1 || got[0] != format.MergedKey(s.ID(), 16) {
			t.Fatalf("shard %s: merge records %q after a merge to 17, want the one at 16", s.ID(), got)
		}
		if got := list(format.FlushDir(s.ID())); len(got) != 1 {
			t.Fatalf("shard %s: flush objects %q, want the newest alone", s.ID(), got)
		}
	}
	if got := list(format.FleetPendingDir); len(got) != 0 {
		t.Fatalf("announcements %q: a flush announces nothing", got)
	}
	exactlyOnce(t, baseIDs(t, b), want)
}

// An owner that merges its own shard deletes the flush objects it merged,
// at most once a minute (a LIST and a request): its folder holds its
// newest and those merged within the minute.
func TestAnOwnerDeletesItsMergedFlushObjects(t *testing.T) {
	under := newTable(t, "file://"+t.TempDir())
	var flushDeletes atomic.Int64 // requests: a batch is decided once
	b := fault.Wrap(under, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if op == fault.OpDelete && strings.HasPrefix(key, format.FlushDir("w")) {
			flushDeletes.Add(1)
		}
		return fault.Fault{}
	}))
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := open(t, b, "w", walshard.Options{Commit: commit.Options{Now: clock}})
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
		mu.Lock()
		now = now.Add(10 * time.Second)
		mu.Unlock()
		most = max(most, len(listKeys(t, b, format.FlushDir("w"))))
	}
	if d := flushDeletes.Load(); d == 0 || d > flushes*10/60+1 {
		t.Fatalf("%d requests deleted flush objects over %d flushes 10 s apart, want one a minute at most", d, flushes)
	}
	if most > 2*6+2 {
		t.Fatalf("the shard's flush objects numbered %d, want at most the newest and two minutes' worth", most)
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
		if res, err := fleetmerge.Merge(ctx, b, nil); err != nil || res.Shards != 1 {
			t.Fatalf("fleet merge: %+v %v", res, err)
		}
	}
	records := func() []string {
		t.Helper()
		var keys []string
		for o, err := range blob.List(ctx, b, format.FleetMergedDir+"w/", 0) {
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
	if err := b.PutIfAbsent(ctx, format.MergedKey("w", 5), nil); err != nil {
		t.Fatal(err)
	}
	flushes(5, 11)
	if got := records(); len(got) != 1 || got[0] != format.MergedKey("w", 16) {
		t.Fatalf("records %q at watermark 16, want the one at 16 alone", got)
	}
	exactlyOnce(t, baseIDs(t, b), want)
}

// A shard that only upserts has its flush objects deleted too: a merge of
// its upserts that takes the last generation of its state records that
// state as merged (ShardMark.Seq), as a merge of appends does.
func TestAnUpsertingShardsFlushObjectsGo(t *testing.T) {
	b := newTable(t, "file://"+t.TempDir())
	now := time.Now()
	clock := func() time.Time { return now }
	s := open(t, b, "w", walshard.Options{Commit: commit.Options{Now: clock}})
	defer s.Close()
	fo := &fleetmerge.Options{Commit: commit.Options{Now: clock}}
	for round := range 6 {
		rec := batch("w", int64(round%3), int64(10+round))
		err := s.Upsert(ctx, []string{"id"}, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := fleetmerge.Merge(ctx, b, fo); err != nil {
			t.Fatal(err)
		}
		now = now.Add(2 * time.Minute)
	}
	m, err := table.ReadLatest(ctx, b)
	if err != nil || m.Shards["w"].Seq != 7 {
		t.Fatalf("the table's record of w: %+v %v, want seq 7 (the open's state and six flushes)", m.Shards["w"], err)
	}
	if got := listKeys(t, b, format.FlushDir("w")); len(got) > 2 {
		t.Fatalf("flush objects left: %q, want the newest and at most the one merged last", got)
	}
	exactlyOnce(t, baseIDs(t, b), []int64{0, 1, 2, 10, 11, 12, 13, 14, 15})
}
