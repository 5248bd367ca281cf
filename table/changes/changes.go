package changes

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/internal/plant"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
)

// ChangeKind says what a version did to the rows of a Change.
type ChangeKind string

// The kinds of change.
const (
	ChangeInsert ChangeKind = "insert"
	ChangeDelete ChangeKind = "delete"
)

// Change is a batch of rows that one version inserted or deleted.
type Change struct {
	Version uint64
	Kind    ChangeKind
	// Rows are the rows, in the schema of the version that inserted them
	// or, for a delete, of the version before (the deleted rows' values).
	// They are released when the loop body returns; Retain them to keep
	// them.
	Rows arrow.RecordBatch
	// Unit is, in a group's follow, the unit of change the rows are of
	// (see FollowGroup): the id of the fragment the version added that
	// holds them, or for its deletes the version's delete unit.
	Unit uint64
}

// ChangesOptions shape the reads of Changes.
type ChangesOptions struct {
	Columns []string // projection; nil means every column
	// Filter, when set, keeps the changed rows it matches: an insert
	// whose new values match, a delete whose deleted values do. It is
	// bound to the schema the rows are read in (As, or each version's
	// own), so a column that schema lacks is an error naming it.
	Filter      expr.Predicate
	BatchSize   int // rows per batch read; 0 means 8192
	Parallelism int // fragments read at once; 0 means 8
	// ReadAheadBytes bounds what is fetched and not yet decoded, as a
	// scan's (ScanOptions.ReadAheadBytes).
	ReadAheadBytes int64
	Allocator      memory.Allocator
	// Memory, when set, is a budget the reads reserve from, as a scan's
	// (ScanOptions.Memory).
	Memory table.Memory
	// As, when set, is the schema every change's rows are read in: that
	// of a version at or after every version read (the newest of the
	// range, say), its columns found by stored name in older fragments
	// (evolve.go), so that rows before and after a schema change come in
	// one schema. Unset, rows come in the schema of the version that
	// holds them (see Change.Rows).
	As *arrow.Schema

	// owns, when set, says which units of change of a version to read
	// (FollowGroup): the fragments it adds by id, its deletes by its
	// delete unit (deleteUnit).
	owns func(v, unit uint64) bool
}

// Changes yields the rows that versions from+1 through to inserted and
// deleted, version by version in order and, within a version, its deletes
// before its inserts. to 0 means the latest version; from 0 means from the
// table's creation.
//
// What counts as a change follows what a reader of the table saw: an
// append, a shard's merge or a fleet merge inserts the rows of the
// fragments it adds; a delete deletes the rows its deletion vectors add
// (their values, read from the fragment); an overwrite deletes every row
// and inserts its own. A compaction (a rewrite) moves rows and changes
// none, nor does building an index. A commit that a later version takes
// back (Transaction.Undoes: a writer that stalled past garbage collection
// found its objects gone, or thought so) is read as it could be read: if
// its objects were there, its changes and then their taking back are
// delivered (the inserted rows deleted again); if they were gone, it
// never held readable rows, and neither it nor the taking back changes
// anything, nor do the versions between see what it did. Until the
// taking back lands, such a version's changes are an error
// (blob.ErrNotFound).
//
// It reads one manifest per version, and only the fragments a version
// changed: the cost follows the changes, not the table. A version garbage
// collection removed is a *format.ChangesCollectedError naming the oldest that
// remains.
func Changes(ctx context.Context, b blob.Bucket, from, to uint64, opts ChangesOptions) iter.Seq2[Change, error] {
	return func(yield func(Change, error) bool) {
		fail := func(err error) { yield(Change{}, err) }
		newest := to == 0
		if newest {
			latest, err := table.LatestVersion(ctx, b)
			if err != nil {
				fail(err)
				return
			}
			to = latest
		}
		if from > to && newest {
			fail(fmt.Errorf("table: changes from version %d: the table's newest version is %d; changes run from a version the table has reached", from, to))
			return
		}
		if from > to {
			fail(fmt.Errorf("table: changes from version %d to %d: from is after to", from, to))
			return
		}
		prev := &format.Manifest{}
		if from > 0 {
			var err error
			if prev, err = readForChanges(ctx, b, from); err != nil {
				fail(err)
				return
			}
		}
		changesAfter(ctx, b, &changeState{m: prev}, to, opts, yield)
	}
}

// changeState is where a reading of changes stands: the version read
// through, as the reader saw it. Ghosts are the doings of commits that
// never held readable rows (their objects were gone when they landed, and
// a later version takes them back): the fragments they added and the
// deletion vectors they gave, which the versions built on them carry
// until the taking back lands. The reader sees those versions without
// them.
type changeState struct {
	m      *format.Manifest // as seen: ghosts left out
	ghosts ghosts
}

type ghosts struct {
	versions map[uint64]bool // the commits taken back, by version
	frags    map[uint64]bool
	dvs      map[string]*format.Deletion // a ghost deletion vector's key -> the deletion before it
}

// add makes the doings of version m (built on before, as the reader saw
// it) ghosts.
func (g *ghosts) add(before, m *format.Manifest) {
	if g.frags == nil {
		g.versions, g.frags, g.dvs = map[uint64]bool{}, map[uint64]bool{}, map[string]*format.Deletion{}
	}
	g.versions[m.Version] = true
	for _, f := range m.Transaction.Added {
		g.frags[f.ID] = true
	}
	for i := range m.Fragments {
		f := &m.Fragments[i]
		if f.Deletion == nil {
			continue
		}
		if p := before.Fragment(f.ID); p != nil && !sameDeletion(p.Deletion, f.Deletion) {
			g.dvs[f.Deletion.Key] = p.Deletion
		}
	}
}

// view is m without the ghosts.
func (g *ghosts) view(m *format.Manifest) *format.Manifest {
	if len(g.frags) == 0 && len(g.dvs) == 0 {
		return m
	}
	c := *m
	c.Fragments = make([]format.Fragment, 0, len(m.Fragments))
	for _, f := range m.Fragments {
		if g.frags[f.ID] {
			continue
		}
		if f.Deletion != nil {
			if d, ok := g.dvs[f.Deletion.Key]; ok {
				f.Deletion = d
			}
		}
		c.Fragments = append(c.Fragments, f)
	}
	return &c
}

// changesAfter yields the changes of the versions after st's through to,
// and returns where it then stands (nil when it ended early: an error
// yielded, or the consumer stopped).
// A manifest given in have (one already read) is not read again.
func changesAfter(ctx context.Context, b blob.Bucket, st *changeState, to uint64, opts ChangesOptions, yield func(Change, error) bool, have ...*format.Manifest) *changeState {
	st = &changeState{m: st.m, ghosts: st.ghosts}
	for v := st.m.Version + 1; v <= to; v++ {
		var cur *format.Manifest
		for _, m := range have {
			if m != nil && m.Version == v {
				cur = m
			}
		}
		if cur == nil {
			var err error
			if cur, err = readForChanges(ctx, b, v); err != nil {
				yield(Change{}, err)
				return nil
			}
		}
		// The taking back of a commit that never held readable rows adds
		// no row: what it adds are the rows that commit deleted, which
		// never left (a compaction since dropped them; see commit.Undo).
		quietAdds := cur.Transaction.Undoes != 0 && st.ghosts.versions[cur.Transaction.Undoes]
		for inherited := false; ; inherited = true {
			// An object of the version missing before any of its
			// changes went out: if a later version undoes it, the
			// version never held readable rows and changes nothing;
			// if a later version undoes one before it that the reading
			// started after, that one's doings are ghosts too (a
			// position inside such a window); otherwise that is the
			// error.
			var missing error
			yielded := false
			more := versionChanges(ctx, b, st.m, st.ghosts.view(cur), opts, quietAdds, func(c Change, err error) bool {
				if err != nil && !yielded && errors.Is(err, blob.ErrNotFound) {
					missing = err
					return false
				}
				yielded = yielded || err == nil
				return yield(c, err)
			})
			if missing == nil {
				if !more {
					return nil
				}
				st.m = st.ghosts.view(cur)
				break
			}
			undone, err := undoneAfter(ctx, b, v)
			if err != nil {
				yield(Change{}, errors.Join(missing, err))
				return nil
			}
			if undone[v] != nil {
				st.ghosts.add(st.m, cur)
				// st.m stays: v changed nothing.
				m := *st.m
				m.Version = v
				st.m = &m
				break
			}
			if inherited || !st.inherit(undone, v) {
				yield(Change{}, missing)
				return nil
			}
		}
	}
	return st
}

// inherit makes ghosts of the commits in undone at or before the version
// read through that are not ghosts yet (a reading that started inside
// their window), from the transactions that undo them: the fragments
// such a transaction removes, the deletion vectors it gives back. A
// missing object that a version at or after the reader's position
// references was gone before that version landed (garbage collection
// keeps what kept versions reference), so the reader never saw its rows.
// False when there are none.
func (st *changeState) inherit(undone map[uint64]*format.Transaction, v uint64) bool {
	found := false
	for u, t := range undone {
		if u >= v || u > st.m.Version || st.ghosts.versions[u] {
			continue
		}
		if st.ghosts.frags == nil {
			st.ghosts.versions, st.ghosts.frags, st.ghosts.dvs = map[uint64]bool{}, map[uint64]bool{}, map[string]*format.Deletion{}
		}
		st.ghosts.versions[u] = true
		for _, id := range t.Removed {
			st.ghosts.frags[id] = true
		}
		for _, d := range t.Deletions {
			if f := st.m.Fragment(d.FragmentID); f != nil && f.Deletion != nil {
				del := d.Deletion
				st.ghosts.dvs[f.Deletion.Key] = &del
			}
		}
		found = true
	}
	if found {
		m := *st.ghosts.view(st.m)
		st.m = &m
	}
	return found
}

// undoneAfter gives the versions at or before v that version v or a
// later one undoes (a writer that stalled past garbage collection, or a
// repair, took it back: see Transaction.Undoes), each with the
// transaction that undoes it. It reads those versions' transactions, on
// this rare path alone.
func undoneAfter(ctx context.Context, b blob.Bucket, v uint64) (map[uint64]*format.Transaction, error) {
	latest, err := table.LatestVersion(ctx, b)
	if err != nil {
		return nil, err
	}
	undone := map[uint64]*format.Transaction{}
	for u := v; u <= latest; u++ {
		t, err := table.ReadTransaction(ctx, b, u)
		if err != nil {
			return nil, err
		}
		if t.Undoes != 0 && t.Undoes <= v {
			undone[t.Undoes] = t
		}
	}
	return undone, nil
}

// readForChanges reads version v, telling a collected version apart.
func readForChanges(ctx context.Context, b blob.Bucket, v uint64) (*format.Manifest, error) {
	m, err := table.ReadManifest(ctx, b, v)
	if !errors.Is(err, format.ErrVersionNotFound) {
		return m, err
	}
	versions, lerr := table.Versions(ctx, b, 0, false)
	if lerr != nil {
		return nil, errors.Join(err, lerr)
	}
	if len(versions) == 0 || versions[0].Version < v {
		return nil, err // not made yet
	}
	return nil, &format.ChangesCollectedError{Version: v, Oldest: versions[len(versions)-1].Version}
}

// versionChanges yields what cur changed from prev; false when the
// consumer stopped or an error was yielded. With quietAdds, the
// fragments cur adds insert nothing.
func versionChanges(ctx context.Context, b blob.Bucket, prev, cur *format.Manifest, opts ChangesOptions, quietAdds bool, yield func(Change, error) bool) bool {
	if none, err := changesNothing(ctx, b, cur); err != nil || none {
		if err != nil {
			yield(Change{}, err)
		}
		return err == nil
	}
	// A fragment is the same in both versions when its id is, or — a
	// restore adds an earlier version's objects under new ids — its
	// object is: its rows are the same, and only its deletion vector may
	// differ.
	before := make(map[uint64]*format.Fragment, len(prev.Fragments))
	byKey := make(map[string]*format.Fragment, len(prev.Fragments))
	for i := range prev.Fragments {
		before[prev.Fragments[i].ID] = &prev.Fragments[i]
		byKey[prev.Fragments[i].Key] = &prev.Fragments[i]
	}
	var gone, added []format.Fragment
	var deleted, revived []positions
	for i := range cur.Fragments {
		f := &cur.Fragments[i]
		p, ok := before[f.ID]
		if !ok || p.Key != f.Key {
			if p, ok = byKey[f.Key]; !ok || before[p.ID] == nil {
				added = append(added, *f)
				continue
			}
		}
		delete(before, p.ID)
		if sameDeletion(p.Deletion, f.Deletion) {
			continue
		}
		was, err := deletionsAt(ctx, b, prev.Version, p)
		if err != nil {
			yield(Change{}, err)
			return false
		}
		now, err := deletionsAt(ctx, b, cur.Version, f)
		if err != nil {
			yield(Change{}, err)
			return false
		}
		d := format.MinusSorted(now, was)
		if plant.On(plant.ChangesRepeatDeletes) {
			d = now
		}
		if len(d) > 0 {
			deleted = append(deleted, positions{*p, d})
		}
		if r := format.MinusSorted(was, now); len(r) > 0 {
			revived = append(revived, positions{*f, r})
		}
	}
	for _, f := range prev.Fragments {
		if before[f.ID] != nil {
			gone = append(gone, f)
		}
	}
	// emit reads frags as version from held them (so that an error names
	// it) and yields their rows as kind.
	emit := func(unit uint64, kind ChangeKind, from *format.Manifest, frags []format.Fragment, rows map[uint64][]uint32) bool {
		if len(frags) == 0 {
			return true
		}
		sc := from.Schema()
		if opts.As != nil {
			sc = opts.As
		}
		so := table.ScanOptions{Columns: opts.Columns, Filter: opts.Filter, BatchSize: opts.BatchSize, Parallelism: opts.Parallelism, ReadAheadBytes: opts.ReadAheadBytes, Allocator: opts.Allocator, Memory: opts.Memory}
		for rec, err := range table.ScanRowsOf(ctx, b, sc, from.Version, frags, rows, so) {
			if err != nil {
				yield(Change{}, err)
				return false
			}
			if !yield(Change{Version: cur.Version, Kind: kind, Rows: rec, Unit: unit}, nil) {
				return false
			}
		}
		return true
	}
	added, err := readyToAdd(ctx, b, cur.Version, added, len(gone) > 0 || len(deleted) > 0)
	if err != nil {
		yield(Change{}, err)
		return false
	}
	dFrags, dRows := atPositions(deleted)
	rFrags, rRows := atPositions(revived)
	if opts.owns != nil {
		return emitOwned(opts.owns, cur, emit, func(unit uint64) bool {
			return emit(unit, ChangeDelete, prev, gone, nil) && emit(unit, ChangeDelete, prev, dFrags, dRows) &&
				emit(unit, ChangeInsert, cur, rFrags, rRows)
		}, added, quietAdds)
	}
	return emit(0, ChangeDelete, prev, gone, nil) &&
		emit(0, ChangeDelete, prev, dFrags, dRows) &&
		emit(0, ChangeInsert, cur, rFrags, rRows) &&
		(quietAdds || emit(0, ChangeInsert, cur, added, nil))
}

// readyToAdd returns the fragments version v adds, ready to be read for
// its inserts. When the version deletes too, its deletes go out before
// its inserts: the objects it adds are looked for first, so that a
// version whose data garbage collection took (an upsert that stalled,
// taken back later) fails before any of its changes went out. A merge
// that dropped copies of named appends gave the fragments it added
// vectors, which a repair may have written again (withVectorsAt).
func readyToAdd(ctx context.Context, b blob.Bucket, v uint64, added []format.Fragment, deletes bool) ([]format.Fragment, error) {
	if deletes && len(added) > 0 {
		if err := present(ctx, b, v, added); err != nil {
			return nil, err
		}
	}
	return withVectorsAt(ctx, b, v, added)
}

// present checks that the objects of frags, which version v adds, are in
// the bucket (a *MissingDataError, errors.Is blob.ErrNotFound, if not).
func present(ctx context.Context, b blob.Bucket, v uint64, frags []format.Fragment) error {
	for _, f := range frags {
		if _, err := b.Attributes(ctx, f.Key); err != nil {
			if errors.Is(err, blob.ErrNotFound) {
				err = &format.MissingDataError{Version: v, Keys: []string{f.Key}, Detail: fmt.Sprintf("fragment %d", f.ID), Err: err}
			}
			return err
		}
	}
	return nil
}

// changesNothing tells whether cur only moved rows: a rewrite (a
// compaction) or an index build, or the taking back of one. A rewrite
// that takes back a commit (Transaction.Undoes) takes back its rows,
// unless that commit moved rows itself.
func changesNothing(ctx context.Context, b blob.Bucket, cur *format.Manifest) (bool, error) {
	if k := cur.Transaction.Kind; k != format.KindRewrite && k != format.KindCreateIndex {
		return false, nil
	}
	u := cur.Transaction.Undoes
	if u == 0 {
		return true, nil
	}
	t, err := table.ReadTransaction(ctx, b, u)
	switch {
	case err == nil:
		return t.Kind == format.KindRewrite || t.Kind == format.KindCreateIndex, nil
	case errors.Is(err, format.ErrVersionNotFound):
		// The commit taken back was collected since; one whose taking
		// back puts fragments back (its sources' copies) was a
		// compaction.
		return len(cur.Transaction.Added) > 0, nil
	}
	return false, err
}

// positions are rows of a fragment, by offset.
type positions struct {
	f    format.Fragment
	rows []uint32
}

// atPositions makes fragments to read the given rows of whatever their
// deletion vectors say.
func atPositions(ps []positions) ([]format.Fragment, map[uint64][]uint32) {
	if len(ps) == 0 {
		return nil, nil
	}
	frags := make([]format.Fragment, len(ps))
	rows := make(map[uint64][]uint32, len(ps))
	for i, p := range ps {
		frags[i] = p.f
		frags[i].Deletion = nil
		rows[p.f.ID] = p.rows
	}
	return frags, rows
}

func sameDeletion(a, b *format.Deletion) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// ChangeRows gives changes as record batches with their change columns
// (WithChangeColumns), each released when the loop body returns; Follow's
// through markers are left out. The first error ends it.
func ChangeRows(changes iter.Seq2[Change, error], mem memory.Allocator) iter.Seq2[arrow.RecordBatch, error] {
	return changeRows(changes, mem, false)
}

// changeRows is ChangeRows, with the unit column after the two when unit
// is set (GroupRows).
func changeRows(changes iter.Seq2[Change, error], mem memory.Allocator, unit bool) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for c, err := range changes {
			if err != nil {
				yield(nil, err)
				return
			}
			if c.Kind == ChangeThrough {
				continue
			}
			rec := WithChangeColumns(c, mem)
			if unit {
				withUnit := WithUnitColumn(rec, c.Unit, mem)
				rec.Release()
				rec = withUnit
			}
			more := yield(rec, nil)
			rec.Release()
			if !more {
				return
			}
		}
	}
}

// WithChangeColumns returns c's rows with two columns added at the end:
// _change ("insert" or "delete") and _version (the version that made the
// change). The caller releases the result.
func WithChangeColumns(c Change, mem memory.Allocator) arrow.RecordBatch {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	n := int(c.Rows.NumRows())
	kinds := array.NewStringBuilder(mem)
	defer kinds.Release()
	versions := array.NewUint64Builder(mem)
	defer versions.Release()
	for range n {
		kinds.Append(string(c.Kind))
		versions.Append(c.Version)
	}
	k, v := kinds.NewArray(), versions.NewArray()
	defer k.Release()
	defer v.Release()
	fields := append(slices.Clone(c.Rows.Schema().Fields()),
		arrow.Field{Name: evolve.ChangeColumn, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: evolve.VersionColumn, Type: arrow.PrimitiveTypes.Uint64})
	cols := append(slices.Clone(c.Rows.Columns()), k, v)
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(n))
}
