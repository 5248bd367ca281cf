package commit

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/table"
)

// UpsertResult is what an upsert did.
type UpsertResult struct {
	Result
	Inserted int64 // rows the upsert wrote
	Replaced int64 // live rows it deleted because a row it wrote has their key
}

// Upsert writes batches and, in the same commit, deletes every live row
// whose key — its values in the columns keys — one of them has: a key's
// rows become the upsert's row. The batches pass table.Conform as an
// append's; a key must not be null, nor appear twice among the rows
// (table.NewKeySet).
//
// Concurrent upserts of one key leave one row for it, that of the upsert
// that committed last: an upsert re-plans when a commit that lands before
// it may have added rows with one of its keys (an append, a merge or an
// upsert whose key columns' statistics meet its own, see Check) or changed
// a fragment it deletes from. Appends never re-plan for an upsert: rows
// appended rather than upserted may share a key.
func (t *Table) Upsert(ctx context.Context, keys []string, batches ...arrow.RecordBatch) (UpsertResult, error) {
	base := t.base()
	batches, err := conformAll(base.Schema(), batches)
	if err != nil {
		return UpsertResult{}, err
	}
	defer releaseAll(batches)
	ks, err := table.NewKeySet(base.Schema(), keys, batches)
	if err != nil {
		return UpsertResult{}, err
	}
	var rows int64
	for _, b := range batches {
		rows += b.NumRows()
	}
	if rows == 0 {
		return UpsertResult{Result: Result{Version: base.Version, Done: true}}, nil
	}
	f, err := table.WriteFragment(ctx, t.b, base.Schema(), batches...)
	if err != nil {
		return UpsertResult{}, err
	}
	var last error
	for range t.opts.MaxReplans {
		snap, err := t.Refresh(ctx)
		if err != nil {
			return UpsertResult{}, err
		}
		if !snap.Manifest().Schema().Equal(base.Schema()) {
			return UpsertResult{}, &ConflictError{Ours: table.Transaction{Kind: table.KindUpsert}, Version: snap.Version(),
				Reason: "the table's schema changed (an overwrite) after the upsert's rows were written"}
		}
		matches, err := snap.RowsWithKeys(ctx, ks, t.opts.ReadParallelism)
		if err != nil {
			return UpsertResult{}, err
		}
		txn := table.Transaction{Kind: table.KindUpsert, CommitID: table.NewID(), ReadVersion: snap.Version(),
			Keys: keys, Added: []table.Fragment{f}}
		var replaced int64
		written := t.opts.Now()
		bodies := map[string][]byte{}
		for _, id := range slices.Sorted(maps.Keys(matches)) {
			del := matches[id]
			fr := snap.Manifest().Fragment(id)
			key := table.DeletionKey(id, snap.Version()+1)
			bodies[key] = table.EncodeDeletions(del)
			if err := t.b.PutIfAbsent(ctx, key, bodies[key]); err != nil {
				return UpsertResult{}, err
			}
			before := int64(0)
			if fr.Deletion != nil {
				before = fr.Deletion.Count
			}
			replaced += int64(len(del)) - before
			txn.Deletions = append(txn.Deletions, table.FragmentDeletion{FragmentID: id, Deletion: table.Deletion{Key: key, Count: int64(len(del))}})
		}
		res, err := t.Commit(ctx, txn)
		if err == nil {
			if res, err = t.keepDeletions(ctx, res, txn.Deletions, bodies, written); err == nil {
				return UpsertResult{Result: res, Inserted: rows, Replaced: replaced}, nil
			}
		}
		if !IsRetryableConflict(err) || ctx.Err() != nil {
			return UpsertResult{}, err
		}
		last = err
		var ce *ConflictError
		if errors.As(err, &ce) && ce.LostData {
			// Garbage collection took our rows while we stalled; the
			// commit was taken back, its deletion vectors with it.
			if f, err = table.WriteFragment(ctx, t.b, base.Schema(), batches...); err != nil {
				return UpsertResult{}, err
			}
		}
	}
	return UpsertResult{}, &BudgetError{Attempts: t.opts.MaxReplans, Last: last}
}
