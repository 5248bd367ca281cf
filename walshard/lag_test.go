package walshard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
)

// lagging hides from listings the keys under a prefix created after it was
// made, as a store whose listings lag behind its writes does for a moment;
// reads by name see them.
type lagging struct {
	blob.Bucket
	prefix string
	known  map[string]bool
}

func newLagging(t *testing.T, b blob.Bucket, prefix string) *lagging {
	l := &lagging{Bucket: b, prefix: prefix, known: map[string]bool{}}
	for o, err := range blob.List(ctx, b, prefix, 0) {
		if err != nil {
			t.Fatal(err)
		}
		l.known[o.Key] = true
	}
	return l
}

func (l *lagging) ListPage(ctx context.Context, prefix, token string, n int) (blob.Page, error) {
	// Pages are filled from what the listing shows, as a store's are.
	var page blob.Page
	for {
		got, err := l.Bucket.ListPage(ctx, prefix, token, n)
		if err != nil {
			return page, err
		}
		for _, o := range got.Objects {
			if !strings.HasPrefix(o.Key, l.prefix) || l.known[o.Key] {
				page.Objects = append(page.Objects, o)
			}
		}
		page.Next, token = got.Next, got.Next
		if token == "" || (n > 0 && len(page.Objects) > 0) {
			return page, nil
		}
	}
}

// A new owner whose listing of the WAL misses the entries written a
// moment ago still replays them: it reads positions by name.
func TestReplayDoesNotTrustALaggingListing(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "w1", walshard.Options{})
	appendIDs(t, s, seq(0, 5)...)
	lag := newLagging(t, b, "_shards/w1/wal/")
	appendIDs(t, s, seq(5, 5)...) // entries the lagging listing will not show
	s.Close()
	s2 := open(t, lag, "w1", walshard.Options{})
	defer s2.Close()
	exactlyOnce(t, countIDs(t, s2.ScanFresh(ctx, table.ScanOptions{})), seq(0, 10))
}

// A fleet merge takes a shard's generation; the owner learns the new
// watermark from the merge's record (which names no version) when it next
// flushes, and leaves the merged generation out of its state. A fresh
// read through a listing that does not show the merge's version yet must
// still find those rows: it reads the versions after the listed one by
// name until one shows the watermark. (Found by the simulation, seed
// 607048: the fresh read lost the merged rows.)
func TestFreshReadFindsRowsAFleetMergeTookThroughALaggingListing(t *testing.T) {
	b := newTable(t, "mem://")
	lag := newLagging(t, b, format.VersionsDir)
	s := open(t, lag, "w1", walshard.Options{})
	defer s.Close()
	appendIDs(t, s, seq(0, 5)...)
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := fleetmerge.Merge(ctx, b, nil)
	if err != nil || res.Generations != 1 {
		t.Fatalf("fleet merge: %+v %v", res, err)
	}
	appendIDs(t, s, seq(5, 5)...)
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, countIDs(t, s.ScanFresh(ctx, table.ScanOptions{})), seq(0, 10))
}

// A fleet merge deletes the flush objects it merged (all but a shard's
// newest), so a shard's state numbers have holes below the table's count.
// An owner opening the shard through a listing that lags, showing an older
// flush object with a hole after it, goes on from the newest state: a
// create at the listed one's next number finds the hole free, and the new
// owner replayed, from the older state's flushed position, entries that
// were merged already. When the table it read lags too (it counts the
// older state merged, not the newest), the create lands in the hole, and
// the table read again by name after it tells so.
func TestAnOwnerGoesOnFromTheNewestStatePastHolesALaggingListingShows(t *testing.T) {
	for _, tableLags := range []bool{false, true} {
		b := newTable(t, "mem://")
		now := time.Now()
		fo := &fleetmerge.Options{Commit: commit.Options{Now: func() time.Time { return now }}}
		s := open(t, b, "w1", walshard.Options{})
		want := seq(0, 2)
		appendIDs(t, s, want...)
		if _, err := s.Flush(ctx); err != nil { // state 2
			t.Fatal(err)
		}
		if _, err := fleetmerge.Merge(ctx, b, fo); err != nil {
			t.Fatal(err)
		}
		var lag blob.Bucket = newLagging(t, b, format.FlushDir("w1"))
		if tableLags {
			lag = newLagging(t, lag, format.VersionsDir)
		}
		for f := range 4 { // states 3 to 6
			ids := seq(int64(10+f*10), 2)
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
		if m, err := table.ReadLatest(ctx, b); err != nil || m.Shards["w1"].Seq != 6 {
			t.Fatalf("the table's record of w1: %+v %v, want seq 6", m.Shards["w1"], err)
		}
		// The merged flush objects gone but state 2 (a deletion cut
		// short) and the newest.
		for _, n := range []uint64{1, 3, 4, 5} {
			if err := b.Delete(ctx, format.FlushKey("w1", n)); err != nil {
				t.Fatal(err)
			}
		}
		again := open(t, lag, "w1", walshard.Options{})
		if got := listKeys(t, b, format.FlushDir("w1")); len(got) != 3 || got[0] != format.FlushKey("w1", 7) {
			t.Fatalf("tableLags=%v: flush objects after the open: %q, want state 7 the newest of three", tableLags, got)
		}
		ids := seq(100, 2)
		appendIDs(t, again, ids...)
		want = append(want, ids...)
		if _, err := again.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := fleetmerge.Merge(ctx, b, fo); err != nil {
			t.Fatal(err)
		}
		again.Close()
		exactlyOnce(t, baseIDs(t, b), want)
	}
}

// mergeAtCheck runs a fleet merge once, when the owner opening the shard
// reads the table again after creating its state: the merge takes that
// very state (its generations are the old owner's, not yet merged).
type mergeAtCheck struct {
	blob.Bucket
	t       *testing.T
	created bool
	merged  bool
}

func (m *mergeAtCheck) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := m.Bucket.PutIfAbsent(ctx, key, data)
	m.created = m.created || err == nil && strings.HasPrefix(key, format.FlushDir("w1"))
	return err
}

func (m *mergeAtCheck) Attributes(ctx context.Context, key string) (blob.Attributes, error) {
	if m.created && !m.merged && strings.HasPrefix(key, format.VersionsDir) {
		m.merged = true
		if res, err := fleetmerge.Merge(ctx, m.Bucket, nil); err != nil || res.Generations != 1 {
			m.t.Errorf("the fleet merge during the open: %+v %v", res, err)
		}
	}
	return m.Bucket.Attributes(ctx, key)
}

// A fleet merge that takes the state an opening owner just created
// counts its number merged, as one that emptied the number would: the
// table records the new owner's epoch then, and the state stays. (Taken
// for a hole and deleted, the shard went on from nothing and replayed
// merged rows: simulation seed 142900.)
func TestAnOwnersStateAMergeTookAtOnceStays(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "w1", walshard.Options{})
	want := seq(0, 3)
	appendIDs(t, s, want...)
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	hook := &mergeAtCheck{Bucket: b, t: t}
	again := open(t, hook, "w1", walshard.Options{})
	defer again.Close()
	if !hook.merged {
		t.Fatal("no fleet merge ran during the open")
	}
	exactlyOnce(t, baseIDs(t, b), want)
	ids := seq(10, 2)
	appendIDs(t, again, ids...)
	want = append(want, ids...)
	exactlyOnce(t, countIDs(t, again.ScanFresh(ctx, table.ScanOptions{})), want)
	if _, err := again.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, b), want)
}
