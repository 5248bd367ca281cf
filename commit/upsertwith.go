package commit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// UpsertClauses say what an upsert with clauses (UpsertWith) does with
// each row, as SQL's MERGE statement does: the source rows are the
// upsert's, the target rows the table's live rows, and a pair matches when
// they have one key.
type UpsertClauses struct {
	// UpdateMatched: a source row replaces the target rows with its key —
	// those for which MatchedIf, when given, is true: a filter over the
	// pair, the target's columns written target.COL (or COL), the
	// source's source.COL ("target.step < source.step").
	UpdateMatched bool
	MatchedIf     string
	// InsertUnmatched: a source row whose key no target row has is
	// inserted.
	InsertUnmatched bool
	// DeleteUnmatchedBySource: a target row whose key no source row has is
	// deleted — when BySourceIf, given, is true of it (a filter over its
	// columns).
	DeleteUnmatchedBySource bool
	BySourceIf              string
}

// ErrBadClauses: upsert clauses that do nothing, or a condition that does not
// parse or bind.
var ErrBadClauses = errors.New("commit: bad upsert clauses")

// UpsertWith writes batches into the table by the key columns keys, as
// clauses say, in one commit: the rows it writes as one fragment, the rows
// it replaces or deletes by deletion vectors. It reads every live row's key
// (and the columns its conditions name), so that it counts what it
// inserts, updates and deletes; Upsert, which needs no count of matches,
// finds its keys through the key index and statistics instead. A key must
// not be null nor appear twice among the batches.
//
// It plans again, as an upsert does, when rows that may hold its keys land
// first (any of its keys, written or not: KeyRange), or a fragment it
// deletes from, or holding rows it matched and left (Read), changes; with
// DeleteUnmatchedBySource, when any rows land first (they may be rows the
// source lacks, which it must delete). Named by key (nil: unnamed), sent
// again it answers the first one's version and changes nothing.
func (t *Table) UpsertWith(ctx context.Context, key *format.Idempotency, keys []string, c UpsertClauses, batches ...arrow.RecordBatch) (UpsertResult, error) {
	if !c.UpdateMatched && !c.InsertUnmatched && !c.DeleteUnmatchedBySource {
		return UpsertResult{}, fmt.Errorf("%w: an upsert needs a clause: update the matched rows, insert the others, or delete the rows the source lacks", ErrBadClauses)
	}
	in, err := t.readUpsert(ctx, key, keys, batches)
	if err != nil || in.known != nil {
		return in.outcome(), err
	}
	defer releaseAll(in.batches)
	base, name := in.base, in.name
	src, err := newUpsertSource(base.Schema(), keys, in.batches)
	if err != nil {
		return UpsertResult{}, err
	}
	defer src.rec.Release()
	var out UpsertResult
	res, err := t.drive(ctx, driveOptions{fromHandle: true, pause: true}, func(ctx context.Context, snap *table.Snapshot, _ error) (Plan, error) {
		if err := schemaMoved(snap, base, "read"); err != nil {
			return Plan{}, err
		}
		m, err := t.planClauses(ctx, snap, src, c)
		if err != nil {
			return Plan{}, err
		}
		out = UpsertResult{Inserted: m.inserted, Updated: m.updated, Replaced: m.replaced, Deleted: m.deleted}
		if len(m.write) == 0 && len(m.found) == 0 {
			return Plan{Done: true}, nil
		}
		p := Plan{Txn: format.Transaction{Kind: format.KindUpsert, CommitID: format.NewID(), ReadVersion: snap.Version(),
			Keys: evolve.StoredNames(base.Schema(), keys), Idempotency: name, DeletesUnmatched: c.DeleteUnmatchedBySource,
			KeyRange: src.keyRange(evolve.StoredNames(base.Schema(), keys)), Read: m.read}, written: t.opts.Now()}
		dels, err := snap.NewDeletions(ctx, m.found, t.opts.ReadParallelism)
		if err != nil {
			return Plan{}, err
		}
		if p.Txn.Deletions, p.bodies, _, err = t.writeVectors(ctx, snap, dels); err != nil {
			return Plan{}, err
		}
		if len(m.write) > 0 {
			rows, err := src.rows(m.write)
			if err != nil {
				return Plan{}, err
			}
			f, err := writeKeyed(ctx, t, base.Schema(), keys, []arrow.RecordBatch{rows})
			rows.Release()
			if err != nil {
				return Plan{}, err
			}
			p.Txn.Added = []format.Fragment{f}
			// Planned again, it writes its rows anew: this plan's go.
			p.Discard = func() { _ = t.b.Delete(context.WithoutCancel(ctx), f.Key) }
		}
		return p, nil
	})
	out.Result = res
	if err != nil || res.Done || res.Duplicate {
		out.Inserted, out.Updated, out.Replaced, out.Deleted = 0, 0, 0, 0
		if res.Duplicate {
			out.Inserted = res.Rows
		}
	}
	return out, err
}

// upsertSource is an upsert's rows, as one batch, and where each key is.
type upsertSource struct {
	rec  arrow.RecordBatch
	keys []string
	at   map[string]int // key → row
}

func newUpsertSource(schema *arrow.Schema, keys []string, batches []arrow.RecordBatch) (*upsertSource, error) {
	cols := make([]arrow.Array, schema.NumFields())
	var n int64
	for i := range cols {
		var parts []arrow.Array
		for _, b := range batches {
			parts = append(parts, b.Column(i))
		}
		if len(parts) == 0 {
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, schema.Field(i).Type, 0)
			continue
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			for _, d := range cols[:i] {
				d.Release()
			}
			return nil, err
		}
		cols[i] = c
	}
	if len(cols) > 0 {
		n = int64(cols[0].Len())
	}
	rec := array.NewRecordBatch(schema, cols, n)
	for _, c := range cols {
		c.Release()
	}
	s := &upsertSource{rec: rec, keys: keys, at: make(map[string]int, n)}
	kc := keyColumns(rec, keys)
	for r := range int(n) {
		if k, ok := table.RowKey(kc, r); ok {
			s.at[k] = r
		}
	}
	return s, nil
}

// keyRange is the range of each key column over every source row, under
// the key columns' stored names (stored, by key).
func (s *upsertSource) keyRange(stored []string) []format.ColumnStats {
	if s.rec.NumRows() == 0 {
		return nil
	}
	out := make([]format.ColumnStats, len(s.keys))
	for i, k := range s.keys {
		col := s.rec.Column(s.rec.Schema().FieldIndices(k)[0])
		out[i].Name = stored[i]
		for r := range col.Len() {
			v, ok := format.ValueAt(col, r)
			if !ok {
				continue
			}
			if out[i].Min == nil || value.Compare(v, *out[i].Min) < 0 {
				out[i].Min = &v
			}
			if out[i].Max == nil || value.Compare(v, *out[i].Max) > 0 {
				out[i].Max = &v
			}
		}
	}
	return out
}

// rows is the source's rows at the offsets of write, in order.
func (s *upsertSource) rows(write map[int]bool) (arrow.RecordBatch, error) {
	ix := takeIndices(slices.Sorted(maps.Keys(write)))
	defer ix.Release()
	cols := make([]arrow.Array, 0, s.rec.NumCols())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for _, c := range s.rec.Columns() {
		taken, err := compute.TakeArray(context.Background(), c, ix)
		if err != nil {
			return nil, err
		}
		cols = append(cols, taken)
	}
	return array.NewRecordBatch(s.rec.Schema(), cols, int64(ix.Len())), nil
}

// takeIndices is rows as an array compute.TakeArray takes.
func takeIndices(rows []int) arrow.Array {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for _, r := range rows {
		b.Append(int64(r))
	}
	return b.NewArray()
}

// keyColumns is rec's columns named keys.
func keyColumns(rec arrow.RecordBatch, keys []string) []arrow.Array {
	out := make([]arrow.Array, len(keys))
	for i, k := range keys {
		out[i] = rec.Column(rec.Schema().FieldIndices(k)[0])
	}
	return out
}

// clausePlan is what an upsert with clauses does against one version.
type clausePlan struct {
	found                                map[uint64][]uint32 // target rows to delete, by fragment
	write                                map[int]bool        // source rows to write
	read                                 []uint64            // fragments of rows matched and left
	inserted, updated, replaced, deleted int64
}

// Prefixes of a matched condition's columns.
const (
	targetPrefix = "target."
	sourcePrefix = "source."
)

// clauseConditions are an upsert's conditions bound: matched over the pair
// (target.C and C the target's, source.C the source's), bySource over a
// target row.
type clauseConditions struct {
	matched, bySource expr.Predicate
	joined            *arrow.Schema
	targetCols        []string // the target's columns they read
}

func bindClauses(schema *arrow.Schema, c UpsertClauses) (*clauseConditions, error) {
	mc := &clauseConditions{}
	if c.MatchedIf != "" {
		p, err := expr.ParseFilter(c.MatchedIf)
		if err != nil {
			return nil, fmt.Errorf("%w: the condition on matched rows: %w", ErrBadClauses, err)
		}
		var fields []arrow.Field
		for _, f := range schema.Fields() {
			fields = append(fields, f, arrow.Field{Name: targetPrefix + f.Name, Type: f.Type, Nullable: f.Nullable},
				arrow.Field{Name: sourcePrefix + f.Name, Type: f.Type, Nullable: f.Nullable})
		}
		mc.joined = arrow.NewSchema(fields, nil)
		if mc.matched, err = expr.Bind(p, mc.joined); err != nil {
			return nil, fmt.Errorf("%w: the condition on matched rows (target.COL or COL for the table's row, source.COL for the upsert's): %w", ErrBadClauses, err)
		}
		for _, col := range p.Columns() {
			if !strings.HasPrefix(col, sourcePrefix) {
				mc.targetCols = append(mc.targetCols, strings.TrimPrefix(col, targetPrefix))
			}
		}
	}
	if c.BySourceIf != "" {
		p, err := expr.ParseFilter(c.BySourceIf)
		if err == nil {
			mc.bySource, err = expr.Bind(p, schema)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: the condition on rows the source lacks: %w", ErrBadClauses, err)
		}
		mc.targetCols = append(mc.targetCols, p.Columns()...)
	}
	return mc, nil
}

// planClauses decides, against snap, which target rows the upsert deletes and
// which source rows it writes: one pass over the live rows' keys (and the
// columns the conditions read).
func (t *Table) planClauses(ctx context.Context, snap *table.Snapshot, src *upsertSource, c UpsertClauses) (*clausePlan, error) {
	schema := snap.Manifest().Schema()
	mc, err := bindClauses(schema, c)
	if err != nil {
		return nil, err
	}
	var cols []string
	for _, f := range schema.Fields() {
		if slices.Contains(src.keys, f.Name) || slices.Contains(mc.targetCols, f.Name) {
			cols = append(cols, f.Name)
		}
	}
	m := &clausePlan{found: map[uint64][]uint32{}, write: map[int]bool{}}
	matchedKeys := map[int]bool{} // source rows whose key a target row has
	read := map[uint64]bool{}     // fragments of target rows matched and left
	for rec, err := range snap.Scan(ctx, table.ScanOptions{Columns: cols, WithRowAddress: true, Parallelism: t.opts.ReadParallelism}) {
		if err != nil {
			return nil, err
		}
		frags := rec.Column(len(cols)).(*array.Uint64)
		offs := rec.Column(len(cols) + 1).(*array.Uint32)
		del := func(i int) { m.found[frags.Value(i)] = append(m.found[frags.Value(i)], offs.Value(i)) }
		byName := make(map[string]arrow.Array, len(cols))
		for i, n := range cols {
			byName[n] = rec.Column(i)
		}
		kc := keyColumns(rec, src.keys)
		var pairs [][2]int // target row, source row: matched, to check
		for i := range int(rec.NumRows()) {
			k, ok := table.RowKey(kc, i)
			j, matched := src.at[k]
			switch {
			case ok && matched:
				matchedKeys[j] = true
				switch {
				case c.UpdateMatched && mc.matched == nil:
					del(i)
					m.replaced++
					m.write[j] = true
				case c.UpdateMatched:
					pairs = append(pairs, [2]int{i, j})
				default:
					read[frags.Value(i)] = true
				}
			case c.DeleteUnmatchedBySource && (mc.bySource == nil || mc.bySource.Match(byName, i)):
				del(i)
				m.deleted++
			}
		}
		if len(pairs) > 0 {
			ok, err := mc.matchPairs(rec, cols, src, pairs)
			if err != nil {
				return nil, err
			}
			for n, p := range pairs {
				if ok[n] {
					del(p[0])
					m.replaced++
					m.write[p[1]] = true
				} else {
					read[frags.Value(p[0])] = true
				}
			}
		}
	}
	m.updated = int64(len(m.write))
	if c.InsertUnmatched {
		for j := range int(src.rec.NumRows()) {
			if !matchedKeys[j] {
				m.write[j] = true
				m.inserted++
			}
		}
	}
	for id := range m.found {
		slices.Sort(m.found[id])
	}
	m.read = slices.Sorted(maps.Keys(read))
	return m, nil
}

// matchPairs evaluates the matched condition for each pair of a target
// row of rec (its columns cols) and a source row.
func (mc *clauseConditions) matchPairs(rec arrow.RecordBatch, cols []string, src *upsertSource, pairs [][2]int) ([]bool, error) {
	ti, si := make([]int, len(pairs)), make([]int, len(pairs))
	for n, p := range pairs {
		ti[n], si[n] = p[0], p[1]
	}
	tix, six := takeIndices(ti), takeIndices(si)
	defer tix.Release()
	defer six.Release()
	joined := map[string]arrow.Array{}
	var made []arrow.Array
	defer func() {
		for _, a := range made {
			a.Release()
		}
	}()
	for i, n := range cols {
		a, err := compute.TakeArray(context.Background(), rec.Column(i), tix)
		if err != nil {
			return nil, err
		}
		made = append(made, a)
		joined[n], joined[targetPrefix+n] = a, a
	}
	for i, f := range src.rec.Schema().Fields() {
		a, err := compute.TakeArray(context.Background(), src.rec.Column(i), six)
		if err != nil {
			return nil, err
		}
		made = append(made, a)
		joined[sourcePrefix+f.Name] = a
	}
	out := make([]bool, len(pairs))
	for n := range pairs {
		out[n] = mc.matched.Match(joined, n)
	}
	return out, nil
}
