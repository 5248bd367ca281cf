package walshard_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
	"github.com/stratadb/strata/walshard/wal"
)

func walKey(shard string, pos uint64) string {
	return "_shards/" + shard + "/wal/" + format.Inverted(pos)
}

// threeEntries is a table whose shard w1 holds, unflushed, the first
// owner's fence at position 1 and the entries at 2, 3 and 4 (ids 1 and 2,
// 3 and 4, 5 and 6); the owner is closed.
func threeEntries(t *testing.T) blob.Bucket {
	t.Helper()
	b := newTable(t, "mem://")
	s := open(t, b, "w1", walshard.Options{})
	appendIDs(t, s, 1, 2)
	appendIDs(t, s, 3, 4)
	appendIDs(t, s, 5, 6)
	s.Close()
	return b
}

// A WAL entry gone from the middle of the log held acknowledged rows:
// opening the shard refuses to skip it, naming it.
func TestAMissingWALEntryIsAnError(t *testing.T) {
	b := threeEntries(t)
	// Position 1 is the first owner's fence; the appends are 2, 3 and 4.
	if err := b.Delete(ctx, walKey("w1", 3)); err != nil {
		t.Fatal(err)
	}
	_, err := walshard.Open(ctx, b, &walshard.Options{Shard: "w1"})
	var me *walshard.MissingEntryError
	if !errors.As(err, &me) || !errors.Is(err, walshard.ErrMissingEntry) || me.Position != 3 {
		t.Fatalf("open over a missing entry: %v", err)
	}
}

// An entry that decodes but holds rows the table cannot take (an older
// build let them in) is quarantined on replay: kept under quarantine/ for
// an operator, reported in the stats, and the shard's other rows move on.
// Before, such an entry made every flush panic and every restart replay
// it again.
func TestAPoisonedWALEntryIsQuarantined(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "w1", walshard.Options{})
	appendIDs(t, s, 1, 2)
	s.Close()
	// Entry 3: strings whose offsets run backwards, framed as a WAL entry
	// of epoch 1 (format in docs/format.md).
	rec := batch("abc", 10, 11, 12)
	defer rec.Release()
	var stream bytes.Buffer
	w := ipc.NewWriter(&stream, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	offsets := []byte{0, 0, 0, 0, 3, 0, 0, 0, 6, 0, 0, 0, 9, 0, 0, 0}
	backwards := []byte{0, 0, 0, 0, 6, 0, 0, 0, 3, 0, 0, 0, 9, 0, 0, 0}
	if bytes.Count(stream.Bytes(), offsets) != 1 {
		t.Fatal("offsets not found in the stream")
	}
	payload := bytes.Replace(stream.Bytes(), offsets, backwards, 1)
	entry := make([]byte, 66, 66+len(payload))
	copy(entry, "STRATAWL")
	binary.LittleEndian.PutUint16(entry[8:], 1)
	entry[10] = 1
	binary.LittleEndian.PutUint64(entry[12:], 1)
	binary.LittleEndian.PutUint64(entry[20:], 3)
	copy(entry[28:54], format.NewID())
	binary.LittleEndian.PutUint64(entry[54:], uint64(len(payload)))
	binary.LittleEndian.PutUint32(entry[62:], crc32.Checksum(payload, crc32.MakeTable(crc32.Castagnoli)))
	entry = append(entry, payload...)
	if err := b.PutIfAbsent(ctx, walKey("w1", 3), entry); err != nil {
		t.Fatal(err)
	}
	var told []walshard.Quarantined
	s, err := walshard.Open(ctx, b, &walshard.Options{Shard: "w1", Listener: walshard.Listener{Quarantine: func(q walshard.Quarantined) { told = append(told, q) }}})
	if err != nil {
		t.Fatalf("open over a poisoned entry: %v", err)
	}
	defer s.Close()
	st := s.Stats()
	if len(st.Quarantined) != 1 || st.Quarantined[0].Position != 3 || len(told) != 1 {
		t.Fatalf("stats %+v, told %+v", st.Quarantined, told)
	}
	if _, err := b.Get(ctx, st.Quarantined[0].Key); err != nil {
		t.Fatalf("the quarantined copy: %v", err)
	}
	appendIDs(t, s, 20)
	if err := s.Drain(ctx); err != nil {
		t.Fatalf("drain after a quarantine: %v", err)
	}
	exactlyOnce(t, baseIDs(t, b), []int64{1, 2, 20})
	ins, err := walshard.Inspect(ctx, b, "w1")
	if err != nil || len(ins.Quarantined) != 1 || ins.Quarantined[0].Position != 3 {
		t.Fatalf("inspect: %+v %v", ins.Quarantined, err)
	}
}

// landsUnseen: while trip is set, a WAL create lands and answers with
// answer (a lost response, or a 412), and the next read of a WAL entry
// fails, which clears trip.
func landsUnseen(trip *atomic.Int64, answer fault.Action) fault.Injector {
	return fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if !strings.Contains(key, "/wal/") || trip.Load() == 0 {
			return fault.Fault{}
		}
		switch op {
		case fault.OpPutIfAbsent:
			return fault.Fault{Action: answer}
		case fault.OpGet:
			trip.Store(0)
			return fault.Fault{Action: fault.Fail}
		}
		return fault.Fault{}
	})
}

// An append whose create landed unseen (a 412 after it landed, and the
// read-back failed) is tried again at the same position. Meanwhile an
// adopter fenced above that entry, replayed it, merged it and cleaned the
// position up: the retry lands in a hole no owner will replay. It must not
// be acknowledged. (Found by the simulation, seed 201785.)
func TestARetryIntoACleanedPositionIsNotAcknowledged(t *testing.T) {
	under := newTable(t, "mem://")
	var trip atomic.Int64 // 1: the next WAL create reports 412 after landing, and its read-back fails
	s := open(t, fault.Wrap(under, landsUnseen(&trip, fault.FalseExists)), "pod-1", walshard.Options{ResolveWithin: -1})
	defer s.Close()
	appendIDs(t, s, 1, 2)
	trip.Store(1)
	if err := appendOnce(s, "pod-1", 3); err == nil {
		t.Fatal("an append whose outcome could not be read was acknowledged")
	}
	if _, err := walshard.Adopt(ctx, under, "pod-1", &walshard.Options{}); err != nil {
		t.Fatal(err)
	}
	err := appendOnce(s, "pod-1", 4)
	if !errors.Is(err, walshard.ErrAppendUnknown) && !errors.Is(err, walshard.ErrFenced) {
		t.Fatalf("the retry after the adoption: %v", err)
	}
	seen := baseIDs(t, under)
	if seen[1] != 1 || seen[2] != 1 || seen[3] > 1 || seen[4] != 0 {
		t.Fatalf("the table holds %v", seen)
	}
}

// An append whose entry landed unseen (the answer lost, and the read-back
// failed) leaves its position uncertain; the next append finds that entry
// there. It is the handle's own: its rows are taken in, as a reopening
// would replay them, and the next append goes after it. It used to be
// taken for a newer owner's fence, fencing the handle for good: a server
// answered 503 to every append on the table until it restarted.
func TestTheNextAppendTakesInAnEntryThatLandedUnseen(t *testing.T) {
	under := newTable(t, "mem://")
	var trip atomic.Int64 // 1: the next WAL create lands with its answer lost, and its read-back fails
	s := open(t, fault.Wrap(under, landsUnseen(&trip, fault.LoseResponse)), "pod-1", walshard.Options{ResolveWithin: -1})
	defer s.Close()
	appendIDs(t, s, 1, 2)
	trip.Store(1)
	if err := appendOnce(s, "pod-1", 3); !errors.Is(err, walshard.ErrAppendUnknown) {
		t.Fatalf("an append whose outcome could not be read: %v, want walshard.ErrAppendUnknown", err)
	}
	appendIDs(t, s, 4)
	appendIDs(t, s, 5)
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, under), []int64{1, 2, 3, 4, 5})
}

// A store that stops answering between an entry's create and its
// read-back, and is back within ResolveWithin, costs the append time, not
// an unknown outcome: it reads the position again until it is answered,
// and its rows are acknowledged, once.
func TestAnAppendWaitsForTheStoreToTellItsOutcome(t *testing.T) {
	under := newTable(t, "mem://")
	var lost, failedReads atomic.Int64
	inj := fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if !strings.Contains(key, "/wal/") || lost.Load() == 0 {
			return fault.Fault{}
		}
		switch {
		case op == fault.OpPutIfAbsent && lost.Load() == 1:
			lost.Store(2)
			return fault.Fault{Action: fault.LoseResponse}
		case op == fault.OpGet && failedReads.Add(1) <= 5:
			return fault.Fault{Action: fault.Fail}
		}
		return fault.Fault{}
	})
	s := open(t, fault.Wrap(under, inj), "pod-1", walshard.Options{ResolveWithin: time.Minute})
	defer s.Close()
	appendIDs(t, s, 1)
	lost.Store(1)
	appendIDs(t, s, 2) // fails the test if not acknowledged
	if n := failedReads.Load(); n < 6 {
		t.Fatalf("the append read its position %d times: the faults did not happen as planned", n)
	}
	appendIDs(t, s, 3)
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, under), []int64{1, 2, 3})
}

// A shard whose WAL lost entries (deleted by hand, or by a lifecycle rule)
// and has no backup is repaired by giving them up: CheckLog names them and
// changes nothing; the fresh read says they are lost (it said "try again"
// before, for ever); Adopt with SetAsideLost sets them aside — a note
// under quarantine/, a fence in their place — and merges the rest; the
// shard then opens as usual, and the table holds every other row once.
func TestARepairSetsAsideLostWALEntries(t *testing.T) {
	b := threeEntries(t)
	// Reopened and closed: a fence at 5 above the entries at 2, 3 and 4.
	// With 3 and 4 gone, the newest data entry after the repair is 2, and
	// only what the repair leaves at 3 and 4 lets a later open past them.
	open(t, b, "w1", walshard.Options{}).Close()
	for _, pos := range []uint64{3, 4} {
		if err := b.Delete(ctx, walKey("w1", pos)); err != nil {
			t.Fatal(err)
		}
	}
	damage, err := walshard.CheckLog(ctx, b, "w1")
	if err != nil || len(damage) != 2 || !errors.Is(damage[0], walshard.ErrMissingEntry) || !errors.Is(damage[1], walshard.ErrMissingEntry) {
		t.Fatalf("CheckLog: %v %v, want positions 3 and 4 missing", damage, err)
	}
	for _, err := range walshard.ScanFleet(ctx, b, table.ScanOptions{}) {
		if !errors.Is(err, walshard.ErrMissingEntry) {
			t.Fatalf("a fresh read over a lost entry: %v, want walshard.ErrMissingEntry", err)
		}
		break
	}
	if _, err := walshard.Open(ctx, b, &walshard.Options{Shard: "w1"}); !errors.Is(err, walshard.ErrMissingEntry) {
		t.Fatalf("open over lost entries: %v", err)
	}
	res, err := walshard.Adopt(ctx, b, "w1", &walshard.Options{SetAsideLost: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.SetAside) != 2 || res.SetAside[0].Position != 3 || res.SetAside[1].Position != 4 || res.Rows != 2 {
		t.Fatalf("repair: %+v", res)
	}
	for _, q := range res.SetAside {
		note, err := b.Get(ctx, q.Key)
		if err != nil || !strings.Contains(string(note), "missing") {
			t.Fatalf("the note for position %d: %q %v", q.Position, note, err)
		}
	}
	if damage, err := walshard.CheckLog(ctx, b, "w1"); err != nil || len(damage) != 0 {
		t.Fatalf("CheckLog after the repair: %v %v", damage, err)
	}
	s := open(t, b, "w1", walshard.Options{})
	appendIDs(t, s, 7)
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	exactlyOnce(t, baseIDs(t, b), []int64{1, 2, 7})
}

// An entry that does not decode is set aside the same way, its bytes kept
// under quarantine/.
func TestARepairSetsAsideACorruptWALEntry(t *testing.T) {
	b := threeEntries(t)
	garbage := []byte("STRATAWL not an entry")
	if err := b.Delete(ctx, walKey("w1", 3)); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, walKey("w1", 3), garbage); err != nil {
		t.Fatal(err)
	}
	damage, err := walshard.CheckLog(ctx, b, "w1")
	if err != nil || len(damage) != 1 || !errors.Is(damage[0], wal.ErrCorruptEntry) {
		t.Fatalf("CheckLog: %v %v, want position 3 corrupt", damage, err)
	}
	res, err := walshard.Adopt(ctx, b, "w1", &walshard.Options{SetAsideLost: true})
	if err != nil || len(res.SetAside) != 1 || res.SetAside[0].Position != 3 {
		t.Fatalf("repair: %+v %v", res, err)
	}
	if kept, err := b.Get(ctx, res.SetAside[0].Key); err != nil || !bytes.Equal(kept, garbage) {
		t.Fatalf("the quarantined copy: %q %v", kept, err)
	}
	exactlyOnce(t, baseIDs(t, b), []int64{1, 2, 5, 6})
	open(t, b, "w1", walshard.Options{}).Close()
}

// A flush whose state landed unseen (the create's answer lost, and the
// read back failed) leaves the handle unsure whether its generation is
// the shard's: a fleet merge may take it while the memtable still holds
// its rows. The state is read back before the next fresh read or flush:
// every row once. (Found by the simulation, seed 147710.)
func TestAFlushThatLandedUnseenIsReadBack(t *testing.T) {
	under := newTable(t, "mem://")
	var trip atomic.Int64
	flushes := fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if !strings.HasPrefix(key, format.FlushDir("w1")) || trip.Load() == 0 {
			return fault.Fault{}
		}
		switch op {
		case fault.OpPutIfAbsent:
			return fault.Fault{Action: fault.LoseResponse}
		case fault.OpGet:
			trip.Store(0)
			return fault.Fault{Action: fault.Fail}
		}
		return fault.Fault{}
	})
	s := open(t, fault.Wrap(under, flushes), "w1", walshard.Options{})
	defer s.Close()
	appendIDs(t, s, 1, 2, 3)
	trip.Store(1)
	if _, err := s.Flush(ctx); err == nil {
		t.Fatal("a flush whose outcome was unknown succeeded")
	}
	if res, err := fleetmerge.Merge(ctx, under, nil); err != nil || res.Generations != 1 {
		t.Fatalf("the fleet merge of the landed state: %+v %v", res, err)
	}
	exactlyOnce(t, countIDs(t, s.ScanFresh(ctx, table.ScanOptions{})), []int64{1, 2, 3})
	appendIDs(t, s, 4)
	if _, err := s.Flush(ctx); err != nil {
		t.Fatalf("the flush after the read back: %v", err)
	}
	if _, err := fleetmerge.Merge(ctx, under, nil); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, under), []int64{1, 2, 3, 4})
}
