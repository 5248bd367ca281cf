package commit

import (
	"context"
	"errors"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// OverwriteRows replaces every row of the table with batches (none: the
// table is left empty), keeping its schema, in one commit: the rows are
// conformed as Append's are (a column the table lacks, a value of another
// type, a null where none may be: refused before anything is written),
// and the version they land in holds them alone. In the conflict matrix it
// is an Overwrite: a write planned before it and landing after (an
// append, a merge of a shard, a delete, a compaction) fails or is planned
// again on the overwritten table; an alter that lands first makes it plan
// again under the new schema (its rows conformed again, refused if they no
// longer fit), and another overwrite that lands first is replaced by it.
// Rows acknowledged through shards and not yet merged are not in the
// version it replaces: they are merged on top of it.
//
// Named by key (nil: unnamed), it is safe to send again after losing its
// answer: an overwrite whose name the table records is not applied again
// (it answers the first one's version with Duplicate set), so a retry
// never drops rows written after the first one landed.
func (t *Table) OverwriteRows(ctx context.Context, key *format.Idempotency, batches ...arrow.RecordBatch) (Result, error) {
	if key != nil {
		if err := key.Check(); err != nil {
			return Result{}, err
		}
	}
	base, conformed, err := t.conformLatest(ctx, t.base(), batches)
	if err != nil {
		return Result{}, err
	}
	defer func() { releaseAll(conformed) }()
	name, known, err := t.knownName(ctx, base, key, conformed)
	if err != nil {
		return Result{}, err
	}
	if known != nil {
		return *known, nil
	}
	var rows int64
	for _, b := range conformed {
		rows += b.NumRows()
	}
	// The rows are written once, and again only when the schema they were
	// conformed to changed or garbage collection took them (a stall).
	var f *format.Fragment
	res, err := t.drive(ctx, driveOptions{fromHandle: true}, func(ctx context.Context, snap *table.Snapshot, prev error) (Plan, error) {
		if sc := snap.Manifest().Schema(); !sc.Equal(base.Schema()) {
			again, err := conformAll(sc, batches)
			if err != nil {
				return Plan{}, err
			}
			releaseAll(conformed)
			base, conformed, f = snap.Manifest(), again, nil
		}
		var ce *ConflictError
		if errors.As(prev, &ce) && ce.LostData {
			f = nil
		}
		if f == nil && rows > 0 {
			w, err := fragment.Write(ctx, t.b, base.Schema(), conformed...)
			if err != nil {
				return Plan{}, err
			}
			f = &w
		}
		txn := format.Transaction{Kind: format.KindOverwrite, CommitID: format.NewID(), ReadVersion: snap.Version(),
			SchemaIPC: snap.Manifest().SchemaIPC, Idempotency: name}
		if f != nil {
			txn.Added = []format.Fragment{*f}
		}
		return Plan{Txn: txn}, nil
	})
	if err == nil && !res.Duplicate {
		res.Rows = rows
	}
	return res, err
}
