package walshard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
)

// upsertIDs upserts rows (id, value) by id through s.
func upsertIDs(t *testing.T, s *walshard.Shard, value string, ids ...int64) {
	t.Helper()
	rec := batch(value, ids...)
	defer rec.Release()
	if err := s.Upsert(ctx, []string{"id"}, rec); err != nil {
		t.Fatalf("upsert %v as %s: %v", ids, value, err)
	}
}

// rowsByID reads what rows yields: id → the values of its rows (in the
// "shard" column).
func rowsByID(t *testing.T, rows func(table.ScanOptions) func(func(arrow.RecordBatch, error) bool)) map[int64][]string {
	t.Helper()
	got := map[int64][]string{}
	for rec, err := range rows(table.ScanOptions{Columns: []string{"id", "shard"}}) {
		if err != nil {
			t.Fatal(err)
		}
		ids := rec.Column(0).(*array.Int64)
		vals := rec.Column(1).(*array.String)
		for r := range int(rec.NumRows()) {
			got[ids.Value(r)] = append(got[ids.Value(r)], vals.Value(r))
		}
	}
	return got
}

func tableRows(t *testing.T, b blob.Bucket) map[int64][]string {
	t.Helper()
	snap, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rowsByID(t, func(o table.ScanOptions) func(func(arrow.RecordBatch, error) bool) { return snap.Scan(ctx, o) })
}

func wantRows(t *testing.T, what string, got map[int64][]string, want map[int64]string) {
	t.Helper()
	for id, vals := range got {
		if len(vals) != 1 || want[id] != vals[0] {
			t.Errorf("%s: id %d has rows %q, want one %q", what, id, vals, want[id])
		}
	}
	for id := range want {
		if _, ok := got[id]; !ok {
			t.Errorf("%s: id %d has no row, want %q", what, id, want[id])
		}
	}
}

// TestShardUpsertsLeaveOneRowPerKeyTheLast: upserts through a shard replace
// the table's rows with their keys when merged, a later upsert of the
// shard replacing an earlier one (flushed together or not); a fresh read
// shows one row per key before the merge; a direct upsert committed after
// the merge replaces the shard's row, and the shard's next one, merged
// after it, replaces the direct one.
func TestShardUpsertsLeaveOneRowPerKeyTheLast(t *testing.T) {
	b := newTable(t, "mem://")
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := batch("base", 1, 2, 3, 4, 5)
	if _, err := tb.Append(ctx, base); err != nil {
		t.Fatal(err)
	}
	base.Release()
	s := open(t, b, "a", walshard.Options{})
	defer s.Close()
	upsertIDs(t, s, "a1", 1, 2)
	upsertIDs(t, s, "a2", 2, 3)
	appendIDs(t, s, 6)
	want := map[int64]string{1: "a1", 2: "a2", 3: "a2", 4: "base", 5: "base", 6: "a"}
	wantRows(t, "fresh, unflushed", rowsByID(t, func(o table.ScanOptions) func(func(arrow.RecordBatch, error) bool) { return s.ScanFresh(ctx, o) }), want)
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.PendingGenerations != 2 {
		t.Fatalf("upserts and an append flushed into %d generations, want 2", st.PendingGenerations)
	}
	upsertIDs(t, s, "a3", 3)
	want[3] = "a3"
	wantRows(t, "fresh, flushed", rowsByID(t, func(o table.ScanOptions) func(func(arrow.RecordBatch, error) bool) { return s.ScanFresh(ctx, o) }), want)
	// A projection without the key column still hides replaced rows.
	n := 0
	for rec, err := range s.ScanFresh(ctx, table.ScanOptions{Columns: []string{"shard"}}) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.NumCols() != 1 {
			t.Fatalf("a fresh read of one column gives %d", rec.NumCols())
		}
		n += int(rec.NumRows())
	}
	if n != len(want) {
		t.Errorf("a fresh read of the values alone gives %d rows, want %d", n, len(want))
	}
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	wantRows(t, "merged", tableRows(t, b), want)

	// A direct upsert after the merge wins over it; the shard's next
	// upsert, merged after the direct one, wins over that.
	if _, err := tb.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	d := batch("direct", 1, 4)
	if _, err := tb.Upsert(ctx, []string{"id"}, d); err != nil {
		t.Fatal(err)
	}
	d.Release()
	want[1], want[4] = "direct", "direct"
	wantRows(t, "after a direct upsert", tableRows(t, b), want)
	upsertIDs(t, s, "a4", 4)
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	want[4] = "a4"
	wantRows(t, "after the shard's next merge", tableRows(t, b), want)
}

// TestShardUpsertsSurviveAReopen: upserts acknowledged and not flushed are
// replayed by the next owner as upserts, and a fleet merge installs them
// (after the appends of the pass) replacing rows by key.
func TestShardUpsertsSurviveAReopen(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "a", walshard.Options{})
	appendIDs(t, s, 1, 2, 3)
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	upsertIDs(t, s, "u1", 1)
	upsertIDs(t, s, "u2", 1, 2)
	s.Close() // the memtable is lost; the WAL holds the upserts
	s = open(t, b, "a", walshard.Options{})
	defer s.Close()
	other := open(t, b, "b", walshard.Options{})
	defer other.Close()
	appendIDs(t, other, 7)
	for _, sh := range []*walshard.Shard{s, other} {
		if _, err := sh.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	res, err := fleetmerge.Merge(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Shards != 2 {
		t.Errorf("the fleet merge merged %d shards, want 2", res.Shards)
	}
	wantRows(t, "after a reopen and a fleet merge", tableRows(t, b), map[int64]string{1: "u2", 2: "u2", 3: "a", 7: "b"})
}

// TestShardUpsertRefusesBadKeys: what an upsert cannot key by is refused
// before anything is written, with a typed error.
func TestShardUpsertRefusesBadKeys(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "a", walshard.Options{})
	defer s.Close()
	rec := batch("x", 1, 1)
	defer rec.Release()
	for _, keys := range [][]string{{"id"}, {"nope"}, {}} {
		var ie *evolve.InputError
		if err := s.Upsert(ctx, keys, rec); !errors.As(err, &ie) {
			t.Errorf("upsert by %q of a key twice: %v, want a *table.InputError", keys, err)
		}
	}
	if st := s.Stats(); st.MemtableRows != 0 {
		t.Errorf("refused upserts wrote: %+v", st)
	}
}

// TestShardUpsertSentAgainStoresNothingTwice: a named upsert sent again
// (its answer lost) answers the first one's outcome, through this handle
// and through the next owner.
func TestShardUpsertSentAgainStoresNothingTwice(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "a", walshard.Options{})
	rec := batch("u", 1, 2)
	defer rec.Release()
	name := format.Idempotency{Producer: "grader", Seq: 7}
	first, err := s.UpsertOnce(ctx, &name, []string{"id"}, false, rec)
	if err != nil || first.Duplicate {
		t.Fatalf("first upsert: %+v %v", first, err)
	}
	again, err := s.UpsertOnce(ctx, &name, []string{"id"}, false, rec)
	if err != nil || !again.Duplicate || again.Position != first.Position {
		t.Fatalf("the same upsert again: %+v %v, want a duplicate of %+v", again, err, first)
	}
	s.Close()
	s = open(t, b, "a", walshard.Options{})
	defer s.Close()
	if again, err = s.UpsertOnce(ctx, &name, []string{"id"}, false, rec); err != nil || !again.Duplicate {
		t.Fatalf("the same upsert through the next owner: %+v %v", again, err)
	}
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	wantRows(t, "after the upserts sent again", tableRows(t, b), map[int64]string{1: "u", 2: "u"})
}

// TestMergesInstallMixedGenerationsAtOnce: a shard whose generations
// alternate between upserts and appends is merged whole by one Merge, and
// another's by one FleetMerge, though each generation of upserts takes a
// commit of its own.
func TestMergesInstallMixedGenerationsAtOnce(t *testing.T) {
	b := newTable(t, "mem://")
	for i, name := range []string{"own", "fleet"} {
		s := open(t, b, name, walshard.Options{})
		defer s.Close()
		base := int64(100 * i)
		upsertIDs(t, s, name+"1", base+1, base+2)
		appendIDs(t, s, base+3)
		upsertIDs(t, s, name+"2", base+2)
		appendIDs(t, s, base+4)
		if _, err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if n := s.Stats().PendingGenerations; n != 4 {
			t.Fatalf("%s: %d generations pending, want 4", name, n)
		}
		if name == "own" {
			res, err := s.Merge(ctx)
			if err != nil || res.Generations != 4 {
				t.Fatalf("one Merge of four mixed generations: %+v %v", res, err)
			}
			continue
		}
		res, err := fleetmerge.Merge(ctx, b, nil)
		if err != nil || res.Generations != 4 {
			t.Fatalf("one FleetMerge of four mixed generations: %+v %v", res, err)
		}
	}
	wantRows(t, "merged", tableRows(t, b), map[int64]string{1: "own1", 2: "own2", 3: "own", 4: "own", 101: "fleet1", 102: "fleet2", 103: "fleet", 104: "fleet"})
}

// A memtable alternating upserts and appends more often than
// MaxPendingGenerations drains: the runs of one flush do not wait for
// room their own generations took (found by a hostile review: Drain,
// which flushes before it merges, waited forever).
func TestADrainOfManyAlternatingRunsFinishes(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "a", walshard.Options{MaxPendingGenerations: 4})
	defer s.Close()
	for i := range int64(20) {
		if i%2 == 0 {
			upsertIDs(t, s, "u", i)
		} else {
			appendIDs(t, s, i)
		}
	}
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := s.Drain(c); err != nil {
		t.Fatalf("drain of 20 alternating writes: %v (pending %d)", err, s.Stats().PendingGenerations)
	}
	if got := tableRows(t, b); len(got) != 20 {
		t.Fatalf("%d keys after the drain, want 20", len(got))
	}
}

// A flush waiting for room (its queue full) learns of a fleet merge that
// made it, though its own handle never merges.
func TestAFlushWaitingForRoomSeesAFleetMerge(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "a", walshard.Options{MaxPendingGenerations: 2})
	defer s.Close()
	for i := range int64(2) {
		appendIDs(t, s, i)
		if _, err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	appendIDs(t, s, 2)
	done := make(chan error, 1)
	go func() {
		_, err := s.Flush(ctx)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := fleetmerge.Merge(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a flush waiting for room never saw the fleet merge that made it")
	}
}

// A name given to an append is not taken for an upsert of the same rows
// (nor by other keys): the second is refused as a reused name, not
// answered as a duplicate that stored nothing.
func TestAnUpsertsNameCoversItsKeys(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "a", walshard.Options{})
	defer s.Close()
	rec := batch("x", 1, 2)
	defer rec.Release()
	name := format.Idempotency{Producer: "p", Seq: 1}
	if _, err := s.AppendOnce(ctx, name, rec); err != nil {
		t.Fatal(err)
	}
	if ack, err := s.UpsertOnce(ctx, &name, []string{"id"}, false, rec); !errors.Is(err, format.ErrKeyReused) {
		t.Fatalf("an upsert under an append's name: %+v %v, want ErrKeyReused", ack, err)
	}
	other := format.Idempotency{Producer: "p", Seq: 2}
	if _, err := s.UpsertOnce(ctx, &other, []string{"id"}, false, rec); err != nil {
		t.Fatal(err)
	}
	if ack, err := s.UpsertOnce(ctx, &other, []string{"id", "shard"}, false, rec); !errors.Is(err, format.ErrKeyReused) {
		t.Fatalf("an upsert by other keys under an upsert's name: %+v %v, want ErrKeyReused", ack, err)
	}
	if ack, err := s.UpsertOnce(ctx, &other, []string{"id"}, false, rec); err != nil || !ack.Duplicate {
		t.Fatalf("the same upsert again: %+v %v, want a duplicate", ack, err)
	}
}
