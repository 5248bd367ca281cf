package changes_test

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/stratadb/strata/table/changes"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// openRolloutsTable creates a rollouts table in b (in a new folder when b is
// nil) and opens it for commits.
func openRolloutsTable(t testing.TB, b blob.Bucket) (blob.Bucket, *commit.Table) {
	t.Helper()
	ctx := context.Background()
	if b == nil {
		var err error
		if b, err = blob.Open(ctx, "file://"+t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b, tb
}

// appendRollouts commits worker w's rows seq0 … seq0+n-1 in one append.
func appendRollouts(t testing.TB, tb *commit.Table, w int, seq0 int64, n int) commit.Result {
	t.Helper()
	rec := rollouts.Batch(testenv.Allocator(t), 42, w, seq0, n)
	defer rec.Release()
	res, err := tb.Append(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

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
	for c, err := range changes.Changes(context.Background(), b, from, to, changes.ChangesOptions{}) {
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
			case changes.ChangeInsert:
				out[id]++
			case changes.ChangeDelete:
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
	b, tb := openRolloutsTable(t, nil)
	mem := testenv.Allocator(t)
	for i := range 4 {
		appendRollouts(t, tb, 0, int64(i*10), 10)
	}
	if _, _, err := tb.Delete(ctx, expr.In("id", value.Int(3), value.Int(12), value.Int(35))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Delete(ctx, expr.In("id", value.Int(4), value.Int(13))); err != nil {
		t.Fatal(err)
	}
	compacted, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil)
	if err != nil || compacted.Version == 0 {
		t.Fatalf("compaction: %+v %v", compacted, err)
	}
	if _, err := tb.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	appendRollouts(t, tb, 0, 40, 5)
	if _, err := tb.CreateIndex(ctx, "id"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Delete(ctx, expr.In("id", value.Int(20), value.Int(41))); err != nil {
		t.Fatal(err)
	}
	over := rollouts.Batch(mem, 1, 1, 0, 7)
	defer over.Release()
	if _, err := tb.Overwrite(ctx, rollouts.Schema, over); err != nil {
		t.Fatal(err)
	}
	appendRollouts(t, tb, 0, 100, 3)
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
	for c, err := range changes.Changes(ctx, b, 5, 6, changes.ChangesOptions{Columns: []string{"id", "worker"}}) {
		if err != nil {
			t.Fatal(err)
		}
		ids := c.Rows.Column(0).(*array.Int64).Int64Values()
		if c.Kind != changes.ChangeDelete || !slices.Equal(ids, []int64{3}) && !slices.Equal(ids, []int64{12}) && !slices.Equal(ids, []int64{35}) {
			t.Fatalf("v6's change: %s %v", c.Kind, ids)
		}
		if w := c.Rows.Column(1).(*array.String).Value(0); w != "w00" {
			t.Fatalf("a deleted row's worker reads %q, want w00", w)
		}
		withCols := changes.WithChangeColumns(c, mem)
		s := withCols.Schema()
		if s.Field(2).Name != evolve.ChangeColumn || s.Field(3).Name != evolve.VersionColumn ||
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
		_, tb := openRolloutsTable(t, b)
		for i := range fragments {
			appendRollouts(t, tb, 0, int64(i*4), 4)
		}
		if _, _, err := tb.Delete(ctx, expr.Eq("id", value.Int(1))); err != nil {
			t.Fatal(err)
		}
		latest, err := table.LatestVersion(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := b.Record(func() error {
			for _, err := range changes.Changes(ctx, b, latest-2, latest, changes.ChangesOptions{}) {
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
	b, tb := openRolloutsTable(t, nil)
	for i := range 5 {
		appendRollouts(t, tb, 0, int64(i), 1)
	}
	if _, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 2}, time.Now().Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	var gone *format.ChangesCollectedError
	for _, err := range changes.Changes(ctx, b, 1, 0, changes.ChangesOptions{}) {
		if !errors.As(err, &gone) || gone.Version != 1 || gone.Oldest != 5 || !errors.Is(err, format.ErrVersionNotFound) {
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

// A named consumer holds garbage collection back from the versions it has
// not read, for ConsumerRetention: a lagging consumer reads on with no
// gap; past the retention its changes are an error naming the oldest
// version left, never a gap.
func TestGCKeepsWhatANamedConsumerHasNotRead(t *testing.T) {
	ctx := context.Background()
	b, tb := openRolloutsTable(t, nil)
	for i := range 6 {
		appendRollouts(t, tb, 0, int64(i), 1)
	}
	if err := table.SetConsumer(ctx, b, "trainer", 3); err != nil {
		t.Fatal(err)
	}
	if err := table.SetConsumer(ctx, b, "bad/name", 3); !errors.Is(err, format.ErrBadName) {
		t.Fatalf("a consumer named bad/name: %v", err)
	}
	if err := table.SetConsumer(ctx, b, "trainer", 99); !errors.Is(err, format.ErrVersionNotFound) {
		t.Fatalf("a consumer set past the latest version: %v", err)
	}
	if c, err := table.ReadConsumer(ctx, b, "trainer"); err != nil || c.Version != 3 {
		t.Fatalf("after a refused position the consumer reads %+v %v, want version 3", c, err)
	}
	res, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1}, time.Now().Add(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if res.Boundary != 2 || !slices.Equal(res.VersionsDeleted, []uint64{1, 2}) {
		t.Fatalf("GC with a consumer through v3 kept boundary %d, deleted %v; want 2 and [1 2]", res.Boundary, res.VersionsDeleted)
	}
	if got, n := replay(t, b, idsAt(t, b, 3), 3, 7); n != 4 || len(got) != 6 {
		t.Fatalf("the consumer's changes after GC: %d rows changed, %d rows, want 4 and 6", n, len(got))
	}
	cs, err := table.Consumers(ctx, b)
	if err != nil || len(cs) != 1 || cs[0].Name != "trainer" || cs[0].Version != 3 {
		t.Fatalf("consumers: %+v %v", cs, err)
	}
	// Eight days on, the consumer's versions are past the retention.
	if _, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1}, time.Now().Add(8*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	var gone *format.ChangesCollectedError
	for _, err := range changes.Changes(ctx, b, 3, 0, changes.ChangesOptions{}) {
		if !errors.As(err, &gone) || gone.Oldest != 7 {
			t.Fatalf("changes past the consumer retention: %v", err)
		}
	}
	if gone == nil {
		t.Fatal("changes past the consumer retention: no error")
	}
	if err := table.SetConsumer(ctx, b, "trainer", 3); !errors.As(err, &gone) {
		t.Fatalf("a consumer set at a collected version: %v", err)
	}
	if err := table.DeleteConsumer(ctx, b, "trainer"); err != nil {
		t.Fatal(err)
	}
	if err := table.DeleteConsumer(ctx, b, "trainer"); !errors.Is(err, format.ErrNotFound) {
		t.Fatalf("deleting a consumer twice: %v", err)
	}
}

// Follow delivers every row once across restarts of a named consumer,
// and a follow that finds nothing new costs one request per poll: a GET
// of the next version, and one in ten a LIST.
func TestFollowResumesAsANamedConsumer(t *testing.T) {
	ctx := context.Background()
	under, err := blob.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := trace.Wrap(under)
	mem := testenv.Allocator(t)
	_, tb := openRolloutsTable(t, b)
	appendRows := func(seq0 int64) {
		rec := rollouts.Batch(mem, 1, 0, seq0, 2)
		defer rec.Release()
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int64]int{}
	// follow reads until it holds want ids, then stops after the next
	// marker, as a process that stops between versions.
	follow := func(want int) {
		t.Helper()
		fctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		opts := changes.FollowOptions{Poll: 5 * time.Millisecond, Consumer: "trainer"}
		opts.Columns = []string{"id"}
		for c, err := range changes.Follow(fctx, b, 0, opts) {
			if err != nil {
				t.Fatal(err)
			}
			if c.Kind == changes.ChangeThrough {
				if len(seen) >= want {
					return
				}
				continue
			}
			for _, id := range c.Rows.Column(0).(*array.Int64).Int64Values() {
				seen[id]++
			}
		}
	}
	for i := range 3 {
		appendRows(int64(i * 2))
	}
	follow(6)
	go func() {
		for i := 3; i < 6; i++ {
			time.Sleep(10 * time.Millisecond)
			appendRows(int64(i * 2))
		}
	}()
	follow(12)
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("id %d delivered %d times", id, n)
		}
	}
	if len(seen) != 12 {
		t.Fatalf("%d ids delivered, want 12", len(seen))
	}
	// Nothing new: one LIST per poll.
	lines, err := b.Record(func() error {
		fctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		for c, err := range changes.Follow(fctx, b, 7, changes.FollowOptions{Poll: 10 * time.Millisecond}) {
			if errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			t.Fatalf("a follow with nothing new yielded %+v %v", c, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	next := "GET " + format.ManifestKey(8)
	lists := 0
	for _, l := range lines {
		switch l {
		case "LIST _versions/":
			lists++
		case next:
		default:
			t.Fatalf("an idle follow asked %q; want only LIST _versions/ and %s:\n%s", l, next, strings.Join(lines, "\n"))
		}
	}
	if len(lines) < 3 || lists == 0 || lists > 1+len(lines)/10 {
		t.Fatalf("an idle follow made %d requests in 100ms at a 10ms poll, %d of them listings:\n%s", len(lines), lists, strings.Join(lines, "\n"))
	}
	t.Logf("an idle follow: %d requests in 100ms at a 10ms poll, one each: %d listings, the others a GET of the next version", len(lines), lists)
}

// A commit whose object garbage collection took is taken back by a later
// version: until then its changes are an error naming the missing object;
// after, it and the taking back change nothing.
func TestChangesSkipACommitTakenBack(t *testing.T) {
	ctx := context.Background()
	b, tb := openRolloutsTable(t, nil)
	var lost *format.Manifest
	for i := range 3 {
		if res := appendRollouts(t, tb, 0, int64(i*2), 2); i == 1 {
			lost = res.Manifest
		}
	}
	if err := b.Delete(ctx, lost.Transaction.Added[0].Key); err != nil { // v3's object, collected
		t.Fatal(err)
	}
	var missing error
	for _, err := range changes.Changes(ctx, b, 1, 0, changes.ChangesOptions{}) {
		if err != nil {
			missing = err
		}
	}
	if !errors.Is(missing, blob.ErrNotFound) || !strings.Contains(missing.Error(), "version 3 references") {
		t.Fatalf("changes over a version whose object is gone, not taken back yet: %v, want blob.ErrNotFound naming version 3", missing)
	}
	if err := commit.Undo(ctx, b, lost, nil); err != nil { // v5
		t.Fatal(err)
	}
	got, n := replay(t, b, map[int64]int{}, 1, 5)
	if n != 4 || !maps.Equal(got, idsAt(t, b, 5)) {
		t.Fatalf("changes 1..5 over a commit taken back: %d rows changed, %v; v5 holds %v", n, got, idsAt(t, b, 5))
	}
	// A follower whose position is inside the window — at v3 itself, or
	// at v4, built on it — reads on without seeing v3's rows.
	for from := uint64(2); from <= 4; from++ {
		at, _ := replay(t, b, idsAt(t, b, 1), 1, from)
		if got, _ := replay(t, b, at, from, 5); !maps.Equal(got, idsAt(t, b, 5)) {
			t.Fatalf("changes %d..5 after changes 1..%d: %v; v5 holds %v", from, from, got, idsAt(t, b, 5))
		}
	}
}

// A commit taken back whose object was still there (its writer could not
// tell) was readable: its rows are delivered, and the taking back
// delivers them as deleted.
func TestChangesDeliverACommitTakenBackThatWasReadable(t *testing.T) {
	ctx := context.Background()
	b, tb := openRolloutsTable(t, nil)
	appendRollouts(t, tb, 0, 0, 2)                           // v2
	undone := appendRollouts(t, tb, 0, 2, 3).Manifest        // v3
	if err := commit.Undo(ctx, b, undone, nil); err != nil { // v4
		t.Fatal(err)
	}
	at3, n := replay(t, b, idsAt(t, b, 1), 1, 3)
	if n != 5 || !maps.Equal(at3, idsAt(t, b, 3)) {
		t.Fatalf("changes 1..3: %d rows, %v; v3 holds %v", n, at3, idsAt(t, b, 3))
	}
	at4, n := replay(t, b, at3, 3, 4)
	if n != 3 || !maps.Equal(at4, idsAt(t, b, 4)) {
		t.Fatalf("changes 3..4, the taking back: %d rows, %v; v4 holds %v", n, at4, idsAt(t, b, 4))
	}
	if got, n := replay(t, b, idsAt(t, b, 1), 1, 4); n != 8 || !maps.Equal(got, idsAt(t, b, 4)) {
		t.Fatalf("changes 1..4: %d rows, %v; v4 holds %v", n, got, idsAt(t, b, 4))
	}
}

// A delete of every row of a fragment needs no vector to be read: the
// manifest's count says it all, and a scan reads none. When garbage
// collection took such a vector during its delete's stall, readers saw
// the rows deleted all the same, so the changes deliver the delete, and
// its taking back (a repair, the deleter gone) delivers the rows again.
func TestChangesOfAWholeFragmentDeleteWhoseVectorIsGone(t *testing.T) {
	ctx := context.Background()
	b, tb := openRolloutsTable(t, nil)
	appendRollouts(t, tb, 0, 0, 3) // v2: ids 0..2, one fragment
	appendRollouts(t, tb, 0, 3, 2) // v3
	res, n, err := tb.Delete(ctx, expr.In("id", value.Int(0), value.Int(1), value.Int(2)))
	if err != nil || n != 3 {
		t.Fatalf("delete: %d rows, %v", n, err)
	}
	del := res.Manifest // v4
	if err := b.Delete(ctx, del.Transaction.Deletions[0].Deletion.Key); err != nil {
		t.Fatal(err)
	}
	if got := idsAt(t, b, 4); len(got) != 2 {
		t.Fatalf("v4 reads %v without the vector; want ids 3 and 4", got)
	}
	at4, n4 := replay(t, b, idsAt(t, b, 1), 1, 4)
	if n4 != 8 || !maps.Equal(at4, idsAt(t, b, 4)) {
		t.Fatalf("changes 1..4: %d rows, %v; v4 holds %v", n4, at4, idsAt(t, b, 4))
	}
	if err := commit.Undo(ctx, b, del, nil); err != nil { // v5
		t.Fatal(err)
	}
	if got, n := replay(t, b, at4, 4, 5); n != 3 || !maps.Equal(got, idsAt(t, b, 5)) {
		t.Fatalf("changes 4..5, the taking back, after a reader saw v4: %d rows, %v; v5 holds %v", n, got, idsAt(t, b, 5))
	}
	if got, _ := replay(t, b, idsAt(t, b, 1), 1, 5); !maps.Equal(got, idsAt(t, b, 5)) {
		t.Fatalf("changes 1..5: %v; v5 holds %v", got, idsAt(t, b, 5))
	}
}

// A filter keeps the changed rows it matches: inserts by their values,
// deletes by the deleted rows' values; a version none of whose changes
// match gives nothing, and a column the rows lack is an error naming it.
func TestChangesKeepTheChangedRowsAFilterMatches(t *testing.T) {
	ctx := context.Background()
	b, tb := openRolloutsTable(t, nil)
	appendRollouts(t, tb, 0, 0, 10)
	appendRollouts(t, tb, 1, 0, 10)
	appendRollouts(t, tb, 0, 10, 10) // v4: nothing of w01
	w1 := int64(rollouts.IDBase)
	if _, _, err := tb.Delete(ctx, expr.In("id", value.Int(3), value.Int(w1+4), value.Int(w1+5))); err != nil {
		t.Fatal(err)
	}
	pred, err := expr.ParseFilter(`worker = "w01" AND step >= 0`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[changes.ChangeKind][]int64{}
	versions := map[uint64]bool{}
	for c, err := range changes.Changes(ctx, b, 0, 0, changes.ChangesOptions{Filter: pred, Columns: []string{"id"}}) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Rows.NumRows() == 0 {
			t.Fatalf("v%d: a change of no rows", c.Version)
		}
		versions[c.Version] = true
		got[c.Kind] = append(got[c.Kind], c.Rows.Column(0).(*array.Int64).Int64Values()...)
	}
	slices.Sort(got[changes.ChangeDelete])
	if len(got[changes.ChangeInsert]) != 10 || !slices.Equal(got[changes.ChangeDelete], []int64{w1 + 4, w1 + 5}) {
		t.Fatalf("changes matching the filter: %d inserts, deletes %v; want w01's 10 and %v", len(got[changes.ChangeInsert]), got[changes.ChangeDelete], []int64{w1 + 4, w1 + 5})
	}
	for _, id := range got[changes.ChangeInsert] {
		if id < w1 || id >= w1+10 {
			t.Fatalf("insert of id %d, which the filter does not match", id)
		}
	}
	if versions[2] || versions[4] {
		t.Fatalf("versions with changes: %v; v2 and v4 hold none of w01's rows", versions)
	}
	// A delete's rows are read by position: the filter still holds for
	// each, not only for the fragment's statistics.
	upper, err := expr.ParseFilter(fmt.Sprintf("id >= %d", w1+5))
	if err != nil {
		t.Fatal(err)
	}
	var deleted []int64
	for c, err := range changes.Changes(ctx, b, 4, 5, changes.ChangesOptions{Filter: upper, Columns: []string{"id"}}) {
		if err != nil {
			t.Fatal(err)
		}
		deleted = append(deleted, c.Rows.Column(0).(*array.Int64).Int64Values()...)
	}
	if !slices.Equal(deleted, []int64{w1 + 5}) {
		t.Fatalf("v5's deletes with id >= %d: %v, want [%d]", w1+5, deleted, w1+5)
	}
	nope, err := expr.ParseFilter("nope = 1")
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range changes.Changes(ctx, b, 0, 0, changes.ChangesOptions{Filter: nope}) {
		if err == nil || !strings.Contains(err.Error(), `"nope"`) {
			t.Fatalf("a filter on a missing column: %v, want an error naming it", err)
		}
		break
	}
}
