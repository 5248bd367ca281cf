package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/table/evolve"
)

// Schema changers.
//
// An alterer changes the table's columns while everyone else goes on
// with the schema they hold: it adds int64 columns ("e1", "e2", …), renames
// them, drops them, renames blob to payload and back, and lets blob hold
// nulls. It never touches id and val, which the others filter, key and
// assign by name; every writer keeps writing rows of the first schema
// (id, val, blob), which the table takes by their first names, and the
// direct appenders and the shards' writers that do not name their appends
// write the added columns their handle or shard knows as well, each with a
// value drawn from the row's id and the column's stored name (extraOf). A
// drop outwaits the shards' schema leases on the simulation's clock.
// Oracles: an alter's commit leaves the rows as they were (it conserves
// them, as a compaction does); every added column of every read row holds
// null or its own value, never another column's, and never null where an
// acknowledged append wrote a value; and no append that began after a
// column's drop answered is acknowledged with a value in that column.

// extraOf is the value direct appenders write in the added column stored
// as name, for row id.
func extraOf(id int64, stored string) int64 {
	h := uint64(0)
	for _, c := range []byte(stored) {
		h = mix(h ^ uint64(c))
	}
	return int64(mix(uint64(id) ^ h))
}

// batchFor is batch(ids) with the columns schema adds to the first three,
// the int64 ones holding extraOf.
func batchFor(sc *arrow.Schema, ids []int64) arrow.RecordBatch {
	base := batch(ids)
	if sc == nil || sc.NumFields() <= 3 {
		return base
	}
	defer base.Release()
	fields := slices.Clone(schema.Fields())
	cols := slices.Clone(base.Columns())
	var made []arrow.Array
	for _, f := range sc.Fields()[3:] {
		if f.Type.ID() != arrow.INT64 {
			continue
		}
		b := array.NewInt64Builder(memory.DefaultAllocator)
		for _, id := range ids {
			b.Append(extraOf(id, evolve.StoredName(f)))
		}
		a := b.NewArray()
		b.Release()
		made = append(made, a)
		fields = append(fields, arrow.Field{Name: f.Name, Type: arrow.PrimitiveTypes.Int64, Nullable: true})
		cols = append(cols, a)
	}
	out := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(len(ids)))
	for _, a := range made {
		a.Release()
	}
	return out
}

// ackExtras records the added columns of sc (the schema an append's
// batch was made for, batchFor) that an acknowledged append of ids that
// began at logical time began wrote values in; it fails when one of them
// was dropped before the append began.
func (w *world) ackExtras(ids []int64, sc *arrow.Schema, began int64, who string) error {
	if sc == nil || sc.NumFields() <= 3 {
		return nil
	}
	var stored []string
	for _, f := range sc.Fields()[3:] {
		if f.Type.ID() == arrow.INT64 {
			stored = append(stored, evolve.StoredName(f))
		}
	}
	w.mu.Lock()
	for _, st := range stored {
		if at := w.droppedAt[st]; at != 0 && at < began {
			w.mu.Unlock()
			return w.fail("no value is acknowledged for a dropped column", "%s acknowledged rows %d..%d with values in the column stored as %s, whose drop answered before the append began",
				who, ids[0], ids[len(ids)-1], st)
		}
	}
	for _, id := range ids {
		w.extras[id] = stored
	}
	w.mu.Unlock()
	return nil
}

// checkExtras checks the added columns of a batch read from a version
// whose schema is sc: each value null or its column's own, and not null
// where an acknowledged append wrote one.
func (w *world) checkExtras(sc *arrow.Schema, rec arrow.RecordBatch) error {
	if sc == nil || rec.NumCols() <= 3 {
		return nil
	}
	ids := rec.Column(0).(*array.Int64).Int64Values()
	for c := 3; c < int(rec.NumCols()); c++ {
		col, ok := rec.Column(c).(*array.Int64)
		if !ok {
			continue
		}
		name := rec.Schema().Field(c).Name
		idx := sc.FieldIndices(name)
		if len(idx) != 1 {
			continue
		}
		stored := evolve.StoredName(sc.Field(idx[0]))
		for i, id := range ids {
			if col.IsValid(i) && col.Value(i) != extraOf(id, stored) {
				return &Violation{Oracle: "an added column holds its own values", Detail: fmt.Sprintf(
					"row %d reads %d in column %s (stored as %s), a value no writer wrote there", id, col.Value(i), name, stored)}
			}
			if !col.IsValid(i) && w.wroteExtra(id, stored) {
				return &Violation{Oracle: "an acknowledged value is kept", Detail: fmt.Sprintf(
					"row %d reads null in column %s (stored as %s), where its acknowledged append wrote %d", id, name, stored, extraOf(id, stored))}
			}
		}
	}
	return nil
}

// wroteExtra tells whether an acknowledged append wrote row id's value in
// the added column stored as stored.
func (w *world) wroteExtra(id int64, stored string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.extras[id], stored)
}

// alterOp makes one schema change.
func (w *world) alterOp(a *actor) (string, string) {
	if err := w.openTable(a); err != nil {
		return "open", short(err)
	}
	if _, err := a.tbl.Refresh(w.ctx); err != nil {
		return "alter", short(err)
	}
	sc := a.tbl.Current().Manifest().Schema()
	var extras []string
	for _, f := range sc.Fields()[min(3, sc.NumFields()):] {
		extras = append(extras, f.Name)
	}
	var c evolve.ColumnChange
	switch n := w.intn(10); {
	case n < 4 || len(extras) == 0:
		w.mu.Lock()
		w.nextExtra++
		name := fmt.Sprintf("e%d", w.nextExtra)
		w.mu.Unlock()
		c = evolve.ColumnChange{Op: evolve.AddColumn, Column: name, Type: arrow.PrimitiveTypes.Int64}
	case n < 6:
		old := extras[w.intn(len(extras))]
		to := old + "r"
		if strings.HasSuffix(old, "r") {
			to = strings.TrimSuffix(old, "r")
		}
		c = evolve.ColumnChange{Op: evolve.RenameColumn, Column: old, To: to}
	case n < 8:
		c = evolve.ColumnChange{Op: evolve.DropColumn, Column: extras[w.intn(len(extras))]}
	case n < 9:
		from, to := "blob", "payload"
		if sc.Field(2).Name == "payload" {
			from, to = to, from
		}
		c = evolve.ColumnChange{Op: evolve.RenameColumn, Column: from, To: to}
	default:
		c = evolve.ColumnChange{Op: evolve.WidenColumn, Column: sc.Field(2).Name, Nullable: true}
	}
	res, err := a.tbl.Alter(w.ctx, c)
	if err == nil && c.Op == evolve.DropColumn {
		stored := evolve.StoredName(sc.Field(sc.FieldIndices(c.Column)[0]))
		w.mu.Lock()
		w.droppedAt[stored] = w.now()
		w.mu.Unlock()
	}
	return "alter", fmt.Sprintf("%s at v%d: %s", c, res.Version, short(err))
}
