package walshard_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
	"github.com/stratadb/strata/walshard/wal"
)

// listKeys lists the keys under prefix.
func listKeys(t *testing.T, b blob.Bucket, prefix string) []string {
	t.Helper()
	var out []string
	for o, err := range blob.List(ctx, b, prefix, 0) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.Key)
	}
	return out
}

// sizeUnder adds up the sizes of the objects under prefix.
func sizeUnder(t *testing.T, b blob.Bucket, prefix string) int64 {
	t.Helper()
	var n int64
	for o, err := range blob.List(ctx, b, prefix, 0) {
		if err != nil {
			t.Fatal(err)
		}
		n += o.Size
	}
	return n
}

// With ReuseBytes set, a flush adds each large WAL entry to the table as
// it is: its rows are written to the store once. Smaller entries still
// go into the generation's object. The owner's merge and a fleet merge
// both add the parts; cleanup leaves the entries the table references,
// and garbage collection takes them once compaction has replaced them.
func reuseLargeEntries(t *testing.T, u string) {
	b := newTable(t, u)
	const reuse = 4096 // a 5,000-row entry is larger, a 5-row one smaller
	w1 := open(t, b, "w1", walshard.Options{ReuseBytes: reuse})
	defer w1.Close()
	w2 := open(t, b, "w2", walshard.Options{ReuseBytes: reuse})
	defer w2.Close()
	for _, s := range []*walshard.Shard{w1, w2} {
		base := int64(0)
		if s == w2 {
			base = 1_000_000
		}
		appendIDs(t, s, seq(base, 5000)...)   // position 2 (the fence is 1)
		appendIDs(t, s, seq(base+5000, 5)...) // position 3
		appendIDs(t, s, seq(base+5005, 5000)...)
		gen, err := s.Flush(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A generation with parts is numbered by its newest position.
		if gen != 4 {
			t.Fatalf("shard %s: generation %d, want 4", s.ID(), gen)
		}
	}
	want := append(seq(0, 10005), seq(1_000_000, 10005)...)
	exactlyOnce(t, countIDs(t, walshard.ScanFleet(ctx, b, table.ScanOptions{})), want)
	if _, err := w1.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := fleetmerge.Merge(ctx, b, nil); err != nil || res.Merged["w2"] != 4 {
		t.Fatalf("fleet merge: %+v, %v", res, err)
	}
	exactlyOnce(t, baseIDs(t, b), want)
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"w1", "w2"} {
		var keys []string
		for _, f := range m.Fragments {
			if strings.HasPrefix(f.Key, format.ShardDir(id)) {
				keys = append(keys, f.Key)
			}
		}
		slices.Sort(keys)
		// The two large entries (positions 2 and 4) join as they are; the
		// 5 rows of position 3, in the flush object, are copied into a
		// fragment named as a generation of the shard.
		if len(keys) != 3 || !strings.HasPrefix(keys[0], format.ShardDir(id)+"gen/") ||
			keys[1] != format.WALKey(id, 4) || keys[2] != format.WALKey(id, 2) {
			t.Fatalf("shard %s: fragments %q", id, keys)
		}
		// The large entries' rows were not written a second time.
		for _, dir := range []string{format.FlushDir(id), format.ShardDir(id) + "gen/"} {
			if n := sizeUnder(t, b, dir); n > reuse {
				t.Fatalf("shard %s: %s holds %d bytes, want only the small entry's rows", id, dir, n)
			}
		}
	}
	// The owner's cleanup deleted the small entry (position 3) and kept
	// what the table references; the fence below (position 1) is left to
	// garbage collection.
	if got := listKeys(t, b, format.WALDir("w1")); !slices.Equal(got, []string{format.WALKey("w1", 4), format.WALKey("w1", 2), format.WALKey("w1", 1)}) {
		t.Fatalf("w1's WAL after its merge: %q", got)
	}
	// Compaction replaces the parts; garbage collection then deletes the
	// WAL entries no kept version references, and the rows stay.
	if _, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1, RetainFor: compactor.MinRetain, SafetyAge: compactor.MinRetain},
		time.Now().Add(3*compactor.MinRetain)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"w1", "w2"} {
		if got := listKeys(t, b, format.WALDir(id)); len(got) != 0 {
			t.Fatalf("shard %s: WAL after compaction and collection: %q", id, got)
		}
	}
	exactlyOnce(t, baseIDs(t, b), want)
	// The shards go on.
	appendIDs(t, w1, seq(20_000, 5000)...)
	if _, err := w1.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w1.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, b), append(want, seq(20_000, 5000)...))
}

func TestReuseLargeEntries(t *testing.T)      { reuseLargeEntries(t, "mem://") }
func TestReuseLargeEntriesMinIO(t *testing.T) { reuseLargeEntries(t, testenv.MinIO(t).URL(t)) }

// Entries written as fragments are replayed by a new owner (with reuse
// on or off) like any other: their rows go into the new owner's
// generation, once.
func TestReusedEntriesReplay(t *testing.T) {
	for _, reopen := range []int64{0, 4096} {
		b := newTable(t, "mem://")
		s := open(t, b, "w1", walshard.Options{ReuseBytes: 4096})
		appendIDs(t, s, seq(0, 5000)...)
		appendIDs(t, s, seq(5000, 5)...)
		s.Close() // not flushed: the rows are in the WAL only
		s = open(t, b, "w1", walshard.Options{ReuseBytes: reopen})
		exactlyOnce(t, countIDs(t, s.ScanFresh(ctx, table.ScanOptions{})), seq(0, 5005))
		appendIDs(t, s, seq(5005, 5000)...)
		if _, err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
		exactlyOnce(t, baseIDs(t, b), seq(0, 10005))
		s.Close()
	}
}

// A damaged entry written as a fragment is refused with a typed error
// naming it, or — where the damage is in what replay does not use (the
// footer's statistics) — gives back exactly the rows written; never other
// rows.
func TestDamagedFragmentEntry(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "w1", walshard.Options{ReuseBytes: 1})
	appendIDs(t, s, seq(0, 300)...)
	s.Close()
	key := format.WALKey("w1", 2)
	good, err := b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for i := 0; i < len(good); i += 1 + len(good)/40 {
		bad := slices.Clone(good)
		bad[i] ^= 0x20
		c, err := blob.Open(ctx, "mem://")
		if err != nil {
			t.Fatal(err)
		}
		for o, err := range blob.List(ctx, b, "", 0) {
			if err != nil {
				t.Fatal(err)
			}
			data, err := b.Get(ctx, o.Key)
			if err != nil {
				t.Fatal(err)
			}
			if o.Key == key {
				data = bad
			}
			if err := c.Put(ctx, o.Key, strings.NewReader(string(data))); err != nil {
				t.Fatal(err)
			}
		}
		r, err := walshard.Open(ctx, c, &walshard.Options{Shard: "w1"})
		if err != nil {
			if !errors.Is(err, wal.ErrCorruptEntry) || !strings.Contains(err.Error(), key) {
				t.Fatalf("byte %d flipped: %v, want a CorruptEntryError naming %s", i, err, key)
			}
			refused++
			continue
		}
		exactlyOnce(t, countIDs(t, r.ScanFresh(ctx, table.ScanOptions{})), seq(0, 300))
		r.Close()
	}
	if refused == 0 {
		t.Fatal("no damaged copy was refused")
	}
	t.Logf("%d bytes: %d damaged copies refused, the rest read back whole", len(good), refused)
}

// An entry whose rows are too few to reach ReuseBytes is written in the
// binary form, which costs less to encode; one whose rows take that much
// memory is a Parquet fragment. Both replay.
func TestOnlyEntriesLargeEnoughToJoinTheTableAreParquet(t *testing.T) {
	b := newTable(t, "file://"+t.TempDir())
	s := open(t, b, "w", walshard.Options{ReuseBytes: 16 << 10})
	appendIDs(t, s, 1, 2, 3)            // 3 rows: a few dozen bytes
	appendIDs(t, s, seq(100, 4_000)...) // 4,000 rows: over 32 KiB of ids alone
	s.Close()
	var forms []string
	for o, err := range blob.List(ctx, b, format.WALDir("w"), 0) {
		if err != nil {
			t.Fatal(err)
		}
		data, err := b.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		forms = append(forms, string(data[:4]))
	}
	// Newest first: the fence of the reopening below is not there yet.
	if !slices.Equal(forms, []string{"PAR1", "STRA", "STRA"}) {
		t.Fatalf("WAL entries begin %q, want the large entry Parquet, the small one and the fence binary", forms)
	}
	s = open(t, b, "w", walshard.Options{ReuseBytes: 16 << 10})
	defer s.Close()
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, b), append([]int64{1, 2, 3}, seq(100, 4_000)...))
}
