package table_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/trace"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
)

// idsAt is the multiset of ids version v holds.
func idsAt(t *testing.T, b blob.Bucket, v uint64) map[int64]int {
	t.Helper()
	ctx := context.Background()
	m, err := table.ReadManifest(ctx, b, v)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int64]int{}
	for rec, err := range table.NewSnapshot(b, m).Scan(ctx, table.ScanOptions{Columns: []string{"id"}}) {
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range rec.Column(0).(*array.Int64).Int64Values() {
			ids[id]++
		}
	}
	return ids
}

// replay applies the changes from+1..to to ids (a copy), checking that
// each carries its version, in order, and that a delete removes a row
// that is there.
func replay(t *testing.T, b blob.Bucket, ids map[int64]int, from, to uint64) (map[int64]int, int) {
	t.Helper()
	out := maps.Clone(ids)
	last, n := from, 0
	for c, err := range table.Changes(context.Background(), b, from, to, table.ChangesOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Version <= from || c.Version > to || c.Version < last {
			t.Fatalf("changes %d..%d: a change of version %d after one of %d", from, to, c.Version, last)
		}
		last = c.Version
		col := c.Rows.Column(c.Rows.Schema().FieldIndices("id")[0]).(*array.Int64)
		for _, id := range col.Int64Values() {
			n++
			switch c.Kind {
			case table.ChangeInsert:
				out[id]++
			case table.ChangeDelete:
				if out[id] == 0 {
					t.Fatalf("v%d deletes id %d, which is not there", c.Version, id)
				}
				if out[id]--; out[id] == 0 {
					delete(out, id)
				}
			default:
				t.Fatalf("change kind %q", c.Kind)
			}
		}
	}
	return out, n
}

// The changes between any two versions, applied to the first, give the
// second: appends insert, deletes delete the deleted rows' values, an
// overwrite deletes every row and inserts its own, and a compaction or an
// index, which move no row in or out, change nothing.
func TestChangesTakeAnyVersionToAnyLater(t *testing.T) {
	ctx := context.Background()
	b, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mem := testenv.Allocator(t)
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendRows := func(seq0 int64, n int) {
		rec := rollouts.Batch(mem, 1, 0, seq0, n)
		defer rec.Release()
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		appendRows(int64(i*10), 10)
	}
	if _, _, err := tb.Delete(ctx, table.In("id", table.Int(3), table.Int(12), table.Int(35))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Delete(ctx, table.In("id", table.Int(4), table.Int(13))); err != nil {
		t.Fatal(err)
	}
	compacted, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil)
	if err != nil || compacted.Version == 0 {
		t.Fatalf("compaction: %+v %v", compacted, err)
	}
	if _, err := tb.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	appendRows(40, 5)
	if _, err := tb.CreateIndex(ctx, "id"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Delete(ctx, table.In("id", table.Int(20), table.Int(41))); err != nil {
		t.Fatal(err)
	}
	over := rollouts.Batch(mem, 1, 1, 0, 7)
	defer over.Release()
	if _, err := tb.Overwrite(ctx, rollouts.Schema, over); err != nil {
		t.Fatal(err)
	}
	appendRows(100, 3)
	latest, err := table.LatestVersion(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	states := map[uint64]map[int64]int{0: {}}
	for v := uint64(1); v <= latest; v++ {
		states[v] = idsAt(t, b, v)
	}
	for from := uint64(0); from <= latest; from++ {
		for to := max(from, 1); to <= latest; to++ {
			got, _ := replay(t, b, states[from], from, to)
			if !maps.Equal(got, states[to]) {
				t.Fatalf("v%d with the changes %d..%d: %d rows, want v%d's %d", from, from, to, len(got), to, len(states[to]))
			}
		}
	}
	// The compaction alone changes nothing, though it rewrote every row.
	if _, n := replay(t, b, states[compacted.Version-1], compacted.Version-1, compacted.Version); n != 0 {
		t.Fatalf("the compaction at v%d gave %d changed rows, want none", compacted.Version, n)
	}
	// A delete's change carries the deleted rows' values.
	for c, err := range table.Changes(ctx, b, 5, 6, table.ChangesOptions{Columns: []string{"id", "worker"}}) {
		if err != nil {
			t.Fatal(err)
		}
		ids := c.Rows.Column(0).(*array.Int64).Int64Values()
		if c.Kind != table.ChangeDelete || !slices.Equal(ids, []int64{3}) && !slices.Equal(ids, []int64{12}) && !slices.Equal(ids, []int64{35}) {
			t.Fatalf("v6's change: %s %v", c.Kind, ids)
		}
		if w := c.Rows.Column(1).(*array.String).Value(0); w != "w00" {
			t.Fatalf("a deleted row's worker reads %q, want w00", w)
		}
		withCols := table.WithChangeColumns(c, mem)
		s := withCols.Schema()
		if s.Field(2).Name != table.ChangeColumn || s.Field(3).Name != table.VersionColumn ||
			withCols.Column(2).(*array.String).Value(0) != "delete" || withCols.Column(3).(*array.Uint64).Value(0) != 6 {
			t.Fatalf("change columns: %v", withCols)
		}
		withCols.Release()
	}
}

// Changes read one manifest per version and only the fragments those
// versions changed: the requests for the last two versions of a table of
// 60 fragments are those for a table of 3.
func TestChangesCostFollowsTheChangesNotTheTable(t *testing.T) {
	ctx := context.Background()
	cost := func(fragments int) []string {
		under, err := blob.Open(ctx, "file://"+t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		b := trace.Wrap(under)
		mem := testenv.Allocator(t)
		if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
			t.Fatal(err)
		}
		tb, err := commit.OpenTable(ctx, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range fragments {
			rec := rollouts.Batch(mem, 1, 0, int64(i*4), 4)
			if _, err := tb.Append(ctx, rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
		if _, _, err := tb.Delete(ctx, table.Eq("id", table.Int(1))); err != nil {
			t.Fatal(err)
		}
		latest, err := table.LatestVersion(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := b.Record(func() error {
			for _, err := range table.Changes(ctx, b, latest-2, latest, table.ChangesOptions{}) {
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return lines
	}
	small, large := cost(3), cost(60)
	if len(large) != len(small) {
		t.Fatalf("the changes of the last two versions cost %d requests on 60 fragments, %d on 3:\n%s\n--\n%s",
			len(large), len(small), strings.Join(large, "\n"), strings.Join(small, "\n"))
	}
	t.Logf("the last two versions' changes (an append and a delete): %d requests, on 3 fragments and on 60", len(small))
}

// A version garbage collection removed is an error naming the oldest
// version that remains, never a gap.
func TestChangesFromACollectedVersionNameTheOldest(t *testing.T) {
	ctx := context.Background()
	b, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mem := testenv.Allocator(t)
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		rec := rollouts.Batch(mem, 1, 0, int64(i), 1)
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if _, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 2}, time.Now().Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	var gone *table.ChangesCollectedError
	for _, err := range table.Changes(ctx, b, 1, 0, table.ChangesOptions{}) {
		if !errors.As(err, &gone) || gone.Version != 1 || gone.Oldest != 5 || !errors.Is(err, table.ErrVersionNotFound) {
			t.Fatalf("changes from a collected version: %v", err)
		}
	}
	if gone == nil {
		t.Fatal("changes from a collected version: no error")
	}
	if _, n := replay(t, b, idsAt(t, b, 5), 5, 6); n != 1 {
		t.Fatalf("the changes of v6: %d rows, want 1", n)
	}
}
