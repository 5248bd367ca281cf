package changes_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/changes"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/table/value"
)

// unitKey names what a group's sink keys its rows by.
type unitKey struct {
	version, unit uint64
	kind          changes.ChangeKind
}

// groupSink is what a group's members delivered, by unit: a unit
// delivered again must hold the same rows.
type groupSink struct {
	mu    sync.Mutex
	units map[unitKey]map[int64]int
	again int
}

func (s *groupSink) take(t *testing.T, member string, got map[unitKey]map[int64]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, ids := range got {
		if have, ok := s.units[k]; ok {
			s.again++
			if !maps.Equal(have, ids) {
				t.Errorf("%s delivered unit %+v again with other rows: %v, then %v", member, k, have, ids)
			}
			continue
		}
		s.units[k] = ids
	}
}

// follow runs member until ctx ends; act, when set, is called at each
// marker with the count of markers so far, and stops the member when it
// returns false. What a member delivered goes to the sink at each marker
// (a sink keyed by unit, as a member's writes would be).
func followAsMember(ctx context.Context, t *testing.T, b blob.Bucket, sink *groupSink, member string, opts changes.GroupOptions, act func(n int) bool) {
	pending := map[unitKey]map[int64]int{}
	markers := 0
	for c, err := range changes.FollowGroup(ctx, b, "trainers", member, opts) {
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("%s: %v", member, err)
			}
			return
		}
		if c.Kind == changes.ChangeThrough {
			sink.take(t, member, pending)
			pending = map[unitKey]map[int64]int{}
			markers++
			if act != nil && !act(markers) {
				return
			}
			continue
		}
		k := unitKey{c.Version, c.Unit, c.Kind}
		if pending[k] == nil {
			pending[k] = map[int64]int{}
		}
		for _, id := range c.Rows.Column(c.Rows.Schema().FieldIndices("id")[0]).(*array.Int64).Int64Values() {
			pending[k][id]++
		}
	}
}

// addFragments commits worker w's rows in n fragments of rows each, in one
// version (as a fleet merge adds several).
func addFragments(t *testing.T, b blob.Bucket, tb *commit.Table, w int, seq0 int64, n, rows int) {
	t.Helper()
	ctx := context.Background()
	var frags []format.Fragment
	for i := range n {
		fw, err := fragment.NewWriter(ctx, b, rollouts.Schema)
		if err != nil {
			t.Fatal(err)
		}
		rec := rollouts.Batch(testenv.Allocator(t), 42, w, seq0+int64(i*rows), rows)
		if err := fw.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		f, err := fw.Close()
		if err != nil {
			t.Fatal(err)
		}
		frags = append(frags, f)
	}
	if _, err := tb.Commit(ctx, format.Transaction{Kind: format.KindAppend, CommitID: format.NewID(), Added: frags}); err != nil {
		t.Fatal(err)
	}
}

// A consumer group's members split the table's new units between them,
// every unit to a member: one that leaves gives its partitions back, one
// that stalls past its lease loses them and, woken, may deliver again
// only what a keyed sink takes once, and one that joins late takes its
// share. Replayed by unit in version order, what the group delivered
// gives the table's rows: nothing lost, an upsert's deletes with its
// inserts.
func TestGroupMembersDeliverEveryUnitOnceToAKeyedSink(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, tb := openRolloutsTable(t, nil)
	appendRollouts(t, tb, 0, 0, 10) // before the group: not delivered
	start, err := table.LatestVersion(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	opts := changes.GroupOptions{Poll: 10 * time.Millisecond, Lease: 300 * time.Millisecond, Partitions: 8, From: start}
	sink := &groupSink{units: map[unitKey]map[int64]int{}}
	var wg sync.WaitGroup
	run := func(member string, act func(n int) bool) {
		wg.Add(1)
		go func() { defer wg.Done(); followAsMember(ctx, t, b, sink, member, opts, act) }()
	}
	run("a", nil)
	run("b", func(n int) bool { return n < 4 }) // leaves after four runs
	stalled := false
	run("c", func(n int) bool {
		if n == 3 && !stalled {
			stalled = true
			time.Sleep(4 * opts.Lease) // stopped past its lease
		}
		return true
	})
	for i := range 40 {
		switch {
		case i == 20:
			run("d", nil) // joins late
		case i%10 == 9: // an upsert of rows appended before
			rec := rollouts.Batch(testenv.Allocator(t), 7, 1, int64(i-5), 3)
			if _, err := tb.Upsert(ctx, []string{"id"}, rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
			continue
		case i%7 == 6:
			if _, _, err := tb.Delete(ctx, expr.Eq("id", value.Int(int64(i-3)))); err != nil {
				t.Fatal(err)
			}
			continue
		case i%5 == 4:
			addFragments(t, b, tb, 2, int64(1000+100*i), 3, 4)
			continue
		}
		appendRollouts(t, tb, 1, int64(i), 1)
		time.Sleep(15 * time.Millisecond)
	}
	latest, err := table.LatestVersion(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the group to read through the latest version", func() bool {
		g, err := table.ReadGroup(ctx, b, "trainers")
		return err == nil && g.Slowest() >= latest
	})
	// The stalled member, woken, claims its share again.
	testenv.Eventually(t, 10*time.Second, "members a, c and d to be live", func() bool {
		g, err := table.ReadGroup(ctx, b, "trainers")
		return err == nil && fmt.Sprint(g.Live(time.Now())) == "[a c d]"
	})
	cancel()
	wg.Wait()
	// Replayed by unit, version by version (deletes first), the group's
	// deliveries give the latest version's rows from the starting one's.
	ids := idsAt(t, b, start)
	for v := start + 1; v <= latest; v++ {
		for _, kind := range []changes.ChangeKind{changes.ChangeDelete, changes.ChangeInsert} {
			for k, rows := range sink.units {
				if k.version != v || k.kind != kind {
					continue
				}
				for id, n := range rows {
					if kind == changes.ChangeInsert {
						ids[id] += n
					} else if ids[id] -= n; ids[id] == 0 {
						delete(ids, id)
					}
				}
			}
		}
	}
	if want := idsAt(t, b, latest); !maps.Equal(ids, want) {
		t.Fatalf("the group's deliveries give %d rows, the table holds %d", len(ids), len(want))
	}
	t.Logf("%d units delivered, %d again", len(sink.units), sink.again)
	// Garbage collection keeps what the group has not read: a group whose
	// slowest partition is at the start holds the versions after it.
	res, err := compactor.GC(context.Background(), b, &compactor.GCPolicy{KeepVersions: 1}, time.Now().Add(3*time.Hour))
	if err != nil || res.Boundary != latest-1 {
		t.Fatalf("GC after the group read all: boundary %d, %v; want %d", res.Boundary, err, latest-1)
	}
}

// A group's slowest position holds garbage collection back as a named
// consumer's does.
func TestGCKeepsWhatAGroupHasNotRead(t *testing.T) {
	ctx := context.Background()
	b, tb := openRolloutsTable(t, nil)
	for i := range 6 {
		appendRollouts(t, tb, 0, int64(i), 1)
	}
	g, err := table.UpdateGroup(ctx, b, "g", nil, func() (*table.Group, error) {
		return &table.Group{Partitions: 2, Members: map[string]time.Time{}, Positions: []uint64{5, 3}}, nil
	}, func(*table.Group) bool { return true })
	if err != nil || g.Seq != 1 || g.Slowest() != 3 {
		t.Fatalf("the group's first state: %+v %v", g, err)
	}
	res, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1}, time.Now().Add(3*time.Hour))
	if err != nil || res.Boundary != 2 {
		t.Fatalf("GC with a group at 3: boundary %d, %v; want 2", res.Boundary, err)
	}
}

// A member with no partition (more members than partitions) waits as
// asked rather than answering at once; a group is not made where its
// changes cannot be read; objects in a group's folder that are not its
// states are not read.
func TestGroupEdges(t *testing.T) {
	ctx := context.Background()
	b, tb := openRolloutsTable(t, nil)
	appendRollouts(t, tb, 0, 0, 1)
	opts := changes.GroupOptions{Partitions: 1, Lease: time.Minute}
	if _, err := changes.ReadGroupShare(ctx, b, "one", "a", opts, nil, 0); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	gr, err := changes.ReadGroupShare(ctx, b, "one", "b", opts, nil, 300*time.Millisecond)
	if err != nil || len(gr.Share.Partitions) != 0 || time.Since(began) < 300*time.Millisecond {
		t.Fatalf("a member with no partition: %+v %v after %v", gr, err, time.Since(began))
	}
	if _, err := changes.ReadGroupShare(ctx, b, "late", "a", changes.GroupOptions{From: 99}, nil, 0); !errors.Is(err, format.ErrVersionNotFound) {
		t.Fatalf("a group starting past the latest version: %v", err)
	}
	if _, err := changes.ReadGroupShare(ctx, b, "wide", "a", changes.GroupOptions{Partitions: table.MaxGroupPartitions + 1}, nil, 0); err == nil {
		t.Fatal("a group of too many partitions was made")
	}
	if _, err := table.ReadGroup(ctx, b, "late"); !errors.Is(err, format.ErrNotFound) {
		t.Fatalf("a refused group has a state: %v", err)
	}
	if err := b.Put(ctx, table.GroupsDir+"one/notes.json", strings.NewReader("{}")); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, table.GroupsDir+"stray/readme.json", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	gs, err := table.Groups(ctx, b)
	if err != nil || len(gs) != 1 || gs[0].Name != "one" {
		t.Fatalf("groups beside stray objects: %v %v", gs, err)
	}
}
