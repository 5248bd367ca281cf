package commit

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// UpdateResult is what an update did.
type UpdateResult struct {
	Result
	Updated int64 // rows changed
}

// Update sets columns of the live rows matching pred to constants, in one
// commit: the rows are deleted (deletion vectors) and written again with
// the assignments applied, as one new fragment. It conflicts as a Delete
// does — it plans again after a delete, rewrite, upsert or update of a
// fragment it changes — and rows inserted after the version it read
// (appended, or upserted under a key that was new) are not updated, as a
// delete does not delete them.
// Assignments are checked against the schema first (expr.BindAssignments).
// No row matching, nothing is committed (Done, at the version read).
func (t *Table) Update(ctx context.Context, pred expr.Predicate, set []expr.Assignment) (UpdateResult, error) {
	var updated int64
	res, err := t.drive(ctx, driveOptions{pause: true}, func(ctx context.Context, snap *table.Snapshot, _ error) (Plan, error) {
		schema := snap.Manifest().Schema()
		bound, err := expr.BindAssignments(schema, set)
		if err != nil {
			return Plan{}, err
		}
		filter, err := expr.Bind(pred, schema)
		if err != nil {
			return Plan{}, err
		}
		f, matches, n, err := t.writeUpdated(ctx, snap, filter, bound)
		if err != nil || n == 0 {
			return Plan{Done: n == 0}, err
		}
		updated = n
		p := Plan{Txn: format.Transaction{Kind: format.KindUpdate, CommitID: format.NewID(), ReadVersion: snap.Version(), Added: []format.Fragment{f}},
			written: t.opts.Now()}
		p.Txn.Deletions, p.bodies, _, err = t.writeVectors(ctx, snap, matches)
		return p, err
	})
	switch {
	case err != nil:
		return UpdateResult{}, err
	case res.Done:
		return UpdateResult{Result: res}, nil
	}
	return UpdateResult{Result: res, Updated: updated}, nil
}

// writeUpdated reads the live rows of snap that filter matches and writes
// them, assigned, as one fragment. It returns the fragment, the matched
// fragments' new deletion vectors (the rows deleted before and the
// matched ones) and the number of rows matched.
func (t *Table) writeUpdated(ctx context.Context, snap *table.Snapshot, filter expr.Predicate, set []expr.Assignment) (format.Fragment, map[uint64][]uint32, int64, error) {
	schema := snap.Manifest().Schema()
	var w *fragment.Writer
	abort := func() {
		if w != nil {
			w.Abort()
		}
	}
	found := map[uint64][]uint32{}
	var n int64
	ncols := len(schema.Fields())
	for rec, err := range snap.Scan(ctx, table.ScanOptions{Filter: filter, WithRowAddress: true, Parallelism: t.opts.ReadParallelism}) {
		if err != nil {
			abort()
			return format.Fragment{}, nil, 0, err
		}
		frags := rec.Column(ncols).(*array.Uint64)
		offs := rec.Column(ncols + 1).(*array.Uint32)
		for i := range int(rec.NumRows()) {
			found[frags.Value(i)] = append(found[frags.Value(i)], offs.Value(i))
		}
		rows := array.NewRecordBatch(schema, rec.Columns()[:ncols], rec.NumRows())
		out, err := expr.Assign(memory.DefaultAllocator, rows, set)
		rows.Release()
		if err == nil && w == nil {
			w, err = fragment.NewWriter(ctx, t.b, schema)
		}
		if err == nil {
			err = w.Write(out)
			out.Release()
		}
		if err != nil {
			abort()
			return format.Fragment{}, nil, 0, err
		}
		n += rec.NumRows()
	}
	if w == nil {
		return format.Fragment{}, nil, 0, nil
	}
	f, err := w.Close()
	if err != nil {
		return format.Fragment{}, nil, 0, err
	}
	found, err = snap.NewDeletions(ctx, found, t.opts.ReadParallelism)
	return f, found, n, err
}
