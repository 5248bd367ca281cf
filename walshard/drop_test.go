package walshard_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
)

// deleteAll deletes every object in b, as a drop does.
func deleteAll(t *testing.T, b blob.Bucket) {
	t.Helper()
	for o, err := range blob.List(ctx, b, "", 0) {
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Delete(ctx, o.Key); err != nil {
			t.Fatal(err)
		}
	}
}

// A writer whose table was dropped and created again learns, at its next
// write after the drop's wait, that the table was dropped (not that a
// newer owner fenced it), and that append is not acknowledged. Before,
// it said "fenced by a newer owner".
func TestAWriterOfADroppedTableLearnsItWasDropped(t *testing.T) {
	b := newTable(t, "mem://")
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	s := open(t, b, "w1", walshard.Options{Commit: commit.Options{Now: now}})
	defer s.Close()
	appendIDs(t, s, 1, 2)
	if _, err := walshard.FenceForDrop(ctx, b); err != nil {
		t.Fatal(err)
	}
	skew.Store(int64(walshard.DropWait))
	deleteAll(t, b)
	if _, err := commit.Create(ctx, b, schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	err := appendOnce(s, "w1", 3)
	if !errors.Is(err, walshard.ErrDropped) {
		t.Fatalf("append after the drop: %v, want ErrDropped", err)
	}
	if err := appendOnce(s, "w1", 4); !errors.Is(err, walshard.ErrDropped) {
		t.Fatalf("the next append: %v, want ErrDropped", err)
	}
	if seen := baseIDs(t, b); len(seen) != 0 {
		t.Fatalf("the new table holds %v", seen)
	}
}

// A writer of a dropped table that flushes before it has learned of the
// drop leaves a flush object under the name; a fleet merge of the table
// created again under it passes over that object (and deletes it), and
// installs none of its rows. Before, the merge installed the old table's
// rows into the new one.
func TestAFleetMergeOfATableCreatedAgainInstallsNoneOfTheDroppedTablesRows(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "w1", walshard.Options{})
	defer s.Close()
	appendIDs(t, s, 1, 2)
	deleteAll(t, b)
	if _, err := commit.Create(ctx, b, schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err) // within a minute of its last read of the claims
	}
	for range 2 {
		if _, err := fleetmerge.Merge(ctx, b, nil); err != nil {
			t.Fatalf("fleet merge of the new table: %v", err)
		}
	}
	if seen := baseIDs(t, b); len(seen) != 0 {
		t.Fatalf("the new table holds the dropped table's rows: %v", seen)
	}
	for o, err := range blob.List(ctx, b, "_fleet/flush/", 0) {
		if err != nil {
			t.Fatal(err)
		}
		t.Fatalf("the dropped table's flush object is still there: %s", o.Key)
	}
}

// A writer whose WAL entry lands while the table's drop fences its shard
// (an append in flight, from a handle quiet long enough to read the claims
// after its write) learns that the table was dropped, not that a newer
// owner claimed the shard, and the append is not acknowledged. Before,
// its error said "landed after a newer owner claimed the shard", and a
// worker could not tell its operator that the table was gone.
func TestAnAppendLandingAsTheDropFencesSaysTheTableWasDropped(t *testing.T) {
	mem := newTable(t, "mem://")
	var skew atomic.Int64
	var armed atomic.Bool
	b := fault.Wrap(mem, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if op == fault.OpPutIfAbsent && strings.Contains(key, "/wal/") && armed.CompareAndSwap(true, false) {
			if _, err := walshard.FenceForDrop(ctx, mem); err != nil {
				t.Errorf("fencing for the drop: %v", err)
			}
		}
		return fault.Fault{}
	}))
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	s := open(t, b, "w1", walshard.Options{Commit: commit.Options{Now: now}})
	defer s.Close()
	appendIDs(t, s, 1, 2)
	skew.Store(int64(walshard.KeepAliveEvery + time.Minute)) // quiet: the claims are read after the write
	armed.Store(true)
	err := appendOnce(s, "w1", 3)
	if !errors.Is(err, walshard.ErrDropped) || !errors.Is(err, walshard.ErrAppendUnknown) || strings.Contains(err.Error(), "newer owner") {
		t.Fatalf("an append landing as the drop fenced: %v, want the table dropped, the outcome unknown, no newer owner", err)
	}
	if armed.Load() {
		t.Fatal("the append wrote no WAL entry")
	}
}

// A writer stalled on merges (its generations await merging, so it writes
// no WAL entry and reads no claim of its shard) learns that its table was
// dropped when it next reads the table: the stalled flush, and every
// append after, end with ErrDropped rather than wait for merges that
// cannot come. Before, a worker so stalled retried its flush for good,
// logging "no table here".
func TestAWriterStalledOnMergesLearnsItsTableWasDropped(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "w1", walshard.Options{MaxPendingGenerations: 1})
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
	if _, err := walshard.FenceForDrop(ctx, b); err != nil {
		t.Fatal(err)
	}
	deleteAll(t, b)
	select {
	case err := <-flushed:
		if !errors.Is(err, walshard.ErrDropped) {
			t.Fatalf("the stalled flush after the drop: %v, want ErrDropped", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the stalled flush still waits a minute after its table was dropped")
	}
	if err := appendOnce(s, "w1", 4); !errors.Is(err, walshard.ErrDropped) {
		t.Fatalf("an append after: %v, want ErrDropped", err)
	}
}
