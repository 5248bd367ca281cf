package walshard_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
	"github.com/stratadb/strata/walshard/wal"
)

// A shard retired (its objects deleted but what the table references,
// as garbage collection retires a quiet shard that holds nothing) opens
// again above what the table records of it: a new epoch above the
// table's, generations above its watermark, so the new owner's rows are
// merged, not taken for rows merged already. An owner that was away
// meanwhile finds its claim gone and is fenced, not acknowledged.
func TestARetiredShardOpensAgainAboveWhatTheTableRecords(t *testing.T) {
	b := newTable(t, "mem://")
	var offset atomic.Int64 // the clock, moved forward
	o := walshard.Options{Commit: commit.Options{Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }}}
	old := open(t, b, "w1", o)
	defer old.Close()
	appendIDs(t, old, 1, 2)
	appendIDs(t, old, 3)
	if _, err := old.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	rec := m.Shards["w1"]
	if rec.Watermark == 0 || rec.Epoch != 1 {
		t.Fatalf("the table records %+v for the shard, want a watermark and epoch 1", rec)
	}
	if empty, err := wal.HoldsNothing(ctx, b, "w1", rec.Watermark); err != nil || !empty {
		t.Fatalf("a merged shard holds something: %v %v", empty, err)
	}
	appendIDs(t, old, 4)
	if empty, err := wal.HoldsNothing(ctx, b, "w1", rec.Watermark); err != nil || empty {
		t.Fatalf("a shard with an entry not flushed holds nothing: %v %v", empty, err)
	}
	if _, err := old.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if empty, err := wal.HoldsNothing(ctx, b, "w1", rec.Watermark); err != nil || empty {
		t.Fatalf("a shard with a generation not merged holds nothing: %v %v", empty, err)
	}
	if _, err := old.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	if m, err = table.ReadLatest(ctx, b); err != nil {
		t.Fatal(err)
	}
	// The retirement: everything of the shard but what the table
	// references, and its fleet objects.
	referenced := map[string]bool{}
	for _, f := range m.Fragments {
		referenced[f.Key] = true
	}
	for _, prefix := range []string{format.ShardDir("w1"), format.FleetDir} {
		for obj, err := range blob.List(ctx, b, prefix, 0) {
			if err != nil {
				t.Fatal(err)
			}
			if referenced[obj.Key] || (prefix == format.FleetDir && !strings.Contains(obj.Key, "w1")) {
				continue
			}
			if err := b.Delete(ctx, obj.Key); err != nil {
				t.Fatal(err)
			}
		}
	}
	offset.Add(int64(time.Minute)) // past the writer's recheck of the claims
	if err := appendOnce(old, "w1", 100); !errors.Is(err, walshard.ErrFenced) {
		t.Fatalf("the owner of a retired shard, away meanwhile: %v, want walshard.ErrFenced", err)
	}
	again := open(t, b, "w1", o)
	defer again.Close()
	if again.Epoch() <= m.Shards["w1"].Epoch {
		t.Fatalf("opened again at epoch %d, the table records %d", again.Epoch(), m.Shards["w1"].Epoch)
	}
	appendIDs(t, again, 5, 6)
	if _, err := again.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	if m, err = table.ReadLatest(ctx, b); err != nil {
		t.Fatal(err)
	}
	seen := countIDs(t, table.NewSnapshot(b, m).Scan(ctx, table.ScanOptions{}))
	exactlyOnce(t, seen, []int64{1, 2, 3, 4, 5, 6})
	if seen[100] != 0 || len(seen) != 6 {
		t.Fatalf("the table holds %v, want ids 1 to 6 once", seen)
	}
}

// An open shard with nothing to write writes its state again every
// KeepAliveEvery, so that its newest object is never older than that and
// garbage collection does not retire the shard of a live owner.
func TestAnIdleOpenShardKeepsItselfAlive(t *testing.T) {
	b := newTable(t, "mem://")
	var offset atomic.Int64
	o := walshard.Options{FlushInterval: 40 * time.Millisecond, Commit: commit.Options{Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }}}
	s := open(t, b, "w1", o)
	defer s.Close()
	states := func() int {
		n := 0
		for _, err := range blob.List(ctx, b, format.FlushDir("w1"), 0) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	before := states()
	time.Sleep(200 * time.Millisecond) // ticks, under KeepAliveEvery
	if n := states(); n != before {
		t.Fatalf("%d states after 200ms idle, %d before: a state written before KeepAliveEvery passed", n, before)
	}
	offset.Add(int64(walshard.KeepAliveEvery + time.Minute))
	deadline := time.Now().Add(5 * time.Second)
	for states() == before {
		if time.Now().After(deadline) {
			t.Fatalf("no state written %v after the last one", walshard.KeepAliveEvery)
		}
		time.Sleep(10 * time.Millisecond)
	}
	appendIDs(t, s, 1) // the handle is not fenced by its own keep-alive
}

// A shard retired (every object of it gone, as garbage collection leaves
// it) and opened again numbers its states above what the table records
// as merged (ShardMark.Seq): otherwise a fleet merge took its new flush
// objects for merged ones, passed them over and deleted them.
func TestARetiredShardNumbersItsStatesAboveTheTablesRecord(t *testing.T) {
	b := newTable(t, "mem://")
	now := time.Now()
	fo := &fleetmerge.Options{Commit: commit.Options{Now: func() time.Time { return now }}}
	s := open(t, b, "w1", walshard.Options{})
	var want []int64
	for f := range 6 {
		ids := seq(int64(f*10), 2)
		appendIDs(t, s, ids...)
		want = append(want, ids...)
		if _, err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fleetmerge.Merge(ctx, b, fo); err != nil {
		t.Fatal(err)
	}
	s.Close()
	m, err := table.ReadLatest(ctx, b)
	if err != nil || m.Shards["w1"].Seq != 7 {
		t.Fatalf("the table's record of w1: %+v %v, want seq 7", m.Shards["w1"], err)
	}
	// Retired: its objects gone but the merged rows the table references,
	// the table's record kept.
	for _, dir := range []string{format.ShardEpochsDir("w1"), format.WALDir("w1"), format.ShardStatesDir("w1"), format.FlushDir("w1"), format.FleetShardsDir + "w1"} {
		if err := blob.DeleteAll(ctx, b, listKeys(t, b, dir)); err != nil {
			t.Fatal(err)
		}
	}
	again := open(t, b, "w1", walshard.Options{})
	defer again.Close()
	for f := range 3 {
		ids := seq(int64(100+f*10), 2)
		appendIDs(t, again, ids...)
		want = append(want, ids...)
		if _, err := again.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(2 * time.Minute) // the merged flush objects are old enough to go
	if _, err := fleetmerge.Merge(ctx, b, fo); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, b), want)
	if _, err := again.Merge(ctx); err != nil {
		t.Fatalf("the owner's merge after the fleet merge: %v", err)
	}
	exactlyOnce(t, baseIDs(t, b), want)
}

// An owner that pauses while it opens, its state written and its fence
// not yet, while a newer owner merges and the shard is retired (its
// objects gone) and opened again, places its fence, when it wakes, after the positions its own
// state counts flushed. The new owner numbers its entries above every
// position the table's merged generations cover (ShardMark.WAL), so that
// fence lands where the new owner's is, or after it: numbered from the
// watermark, the new owner's entries lay below the paused owner's fence,
// with missing positions between them, and the shard no longer opened
// ("WAL entry … is missing": simulation seed 145535).
func TestAnOwnerPausedAcrossARetirementLeavesNoHoleInTheWAL(t *testing.T) {
	under := newTable(t, "mem://")
	s := open(t, under, "w1", walshard.Options{})
	want := seq(0, 5)
	for _, id := range want {
		appendIDs(t, s, id)
	}
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	m, err := table.ReadLatest(ctx, under)
	if err != nil || m.Shards["w1"].WAL != 6 {
		t.Fatalf("the table's record of w1: %+v %v, want WAL position 6 (a fence, then five appends)", m.Shards["w1"], err)
	}
	p := &pauseOnce{Bucket: under, prefix: format.WALDir("w1"), reached: make(chan struct{}), release: make(chan struct{})}
	opened := make(chan error, 1)
	go func() {
		paused, err := walshard.Open(ctx, p, &walshard.Options{Shard: "w1"})
		if err == nil {
			paused.Close()
		}
		opened <- err
	}()
	<-p.reached
	// A newer owner merges (the table records its epoch, above the paused
	// one's claim), and the shard is retired: every object of it gone but
	// the merged rows.
	mid := open(t, under, "w1", walshard.Options{})
	appendIDs(t, mid, 50)
	want = append(want, 50)
	if _, err := mid.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := mid.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	mid.Close()
	for _, dir := range []string{format.ShardEpochsDir("w1"), format.WALDir("w1"), format.ShardStatesDir("w1"), format.FlushDir("w1"), format.FleetShardsDir + "w1"} {
		if err := blob.DeleteAll(ctx, under, listKeys(t, under, dir)); err != nil {
			t.Fatal(err)
		}
	}
	again := open(t, under, "w1", walshard.Options{})
	close(p.release)
	if err := <-opened; !errors.Is(err, walshard.ErrFenced) {
		t.Fatalf("the owner paused across the retirement: %v, want walshard.ErrFenced", err)
	}
	// The paused owner's fence takes the new owner's next position when
	// the positions run on (as when any older owner wakes): the append is
	// refused then, not lost. What the new owner flushes is flushed.
	switch err := appendOnce(again, "w1", 99); {
	case err == nil:
		want = append(want, 99)
		if _, err := again.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	case !errors.Is(err, walshard.ErrFenced):
		t.Fatalf("the new owner's append after the paused owner's fence: %v", err)
	}
	again.Close()
	third := open(t, under, "w1", walshard.Options{})
	defer third.Close()
	ids := seq(100, 2)
	appendIDs(t, third, ids...)
	want = append(want, ids...)
	exactlyOnce(t, countIDs(t, third.ScanFresh(ctx, table.ScanOptions{})), want)
}
