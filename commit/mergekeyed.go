package commit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
)

// MergeKeyed installs a shard's generation of upserts (frags, its
// objects, already written; mark, the shard, its epoch and the
// generation's number as the new watermark): in one commit the
// generation joins the table, every live row whose key — its values in
// the columns stored as keys — one of its rows has is deleted, and the
// shard's watermark moves. It is a transaction of kind merge with Keys
// and Deletions: to the conflict matrix a merge of the shard (done when
// another merge covered the generation, fenced when a newer epoch owns
// the shard) and an upsert (planned again when rows with its keys land
// first, or a fragment it deletes from changes). So a key's row is that
// of the upsert installed last, whether a shard's merge or a direct
// upsert installed it.
//
// A key column dropped since the rows were acknowledged leaves no key to
// replace by: the generation is then installed as an append's rows are.
//
// named lists where frags hold the generation's named upserts: one the
// table records already (another shard's merge, or a direct upsert,
// installed a copy: a retry that reached another server) is dropped, its
// rows deleted from frags by a deletion vector and its keys replacing
// nothing, and the others are recorded (Transaction.Named), as a merge
// of appends does.
func (t *Table) MergeKeyed(ctx context.Context, keys []string, frags []table.Fragment, mark table.ShardMerge, named []table.NamedRows) (UpsertResult, error) {
	var last error
	var pl upsertPlan
	var ks *table.KeySet
	var ksSchema *arrow.Schema
	var ksDrops string // the drops ks was read with
	for plan := range t.opts.MaxReplans {
		began := time.Now()
		snap := t.Current()
		if plan > 0 {
			var err error
			if snap, err = t.Refresh(ctx); err != nil {
				return UpsertResult{}, err
			}
		}
		m := snap.Manifest()
		switch cur := m.Shards[mark.Shard]; {
		case cur.Epoch > mark.Epoch:
			return UpsertResult{}, &ConflictError{Ours: table.Transaction{Kind: table.KindMerge, Shard: mark.Shard, Epoch: mark.Epoch}, Version: m.Version,
				Reason: fmt.Sprintf("shard %q is owned by epoch %d; this merge is from epoch %d (fenced)", mark.Shard, cur.Epoch, mark.Epoch)}
		case cur.Watermark >= mark.Watermark:
			return UpsertResult{Result: Result{Version: m.Version, Done: true}}, nil
		}
		txn := table.Transaction{Kind: table.KindMerge, CommitID: table.NewID(), ReadVersion: m.Version,
			Shard: mark.Shard, Watermark: mark.Watermark, Epoch: mark.Epoch, Seq: mark.Seq, WAL: mark.WAL, Added: frags}
		drops := ""
		if len(named) > 0 {
			txn.Named = m.Producers.DropNamed(named)
			var err error
			if txn.Added, drops, err = dropNamedRows(ctx, t.b, frags, txn.Named, m.Version+1); err != nil {
				return UpsertResult{}, err
			}
		}
		var rows int64
		for _, f := range txn.Added {
			rows += f.Rows
			if f.Deletion != nil {
				rows -= f.Deletion.Count
			}
		}
		var bodies map[string][]byte
		var replaced int64
		written := t.opts.Now()
		if names, ok := table.CurrentNames(m.Schema(), keys); ok {
			if ks == nil || !ksSchema.Equal(m.Schema()) || drops != ksDrops {
				var err error
				if ks, err = keysOfFragments(ctx, t, m.Schema(), names, txn.Added); err != nil {
					return UpsertResult{}, err
				}
				ksSchema, ksDrops, pl = m.Schema(), drops, upsertPlan{}
			}
			matches, err := pl.plan(ctx, snap, ks, t.opts.ReadParallelism)
			if err != nil {
				return UpsertResult{}, err
			}
			txn.Keys = keys
			if txn.Deletions, bodies, replaced, err = t.writeVectors(ctx, snap, matches); err != nil {
				return UpsertResult{}, err
			}
		}
		res, err := t.commitKeeping(ctx, txn, bodies, written)
		if err == nil {
			return UpsertResult{Result: res, Inserted: rows, Replaced: replaced}, nil
		}
		if !IsRetryableConflict(err) || ctx.Err() != nil {
			return UpsertResult{}, err
		}
		last = err
		replanPause(ctx, t.opts, plan+1, time.Since(began))
	}
	return UpsertResult{}, &BudgetError{Attempts: t.opts.MaxReplans, Last: last}
}

// dropNamedRows returns frags with the rows of the named upserts marked
// dropped deleted, by deletion vectors it writes for version v, and a
// description of what it dropped (equal for equal drops).
func dropNamedRows(ctx context.Context, b blob.Bucket, frags []table.Fragment, named []table.NamedRows, v uint64) ([]table.Fragment, string, error) {
	rows := map[string][]uint32{}
	var what strings.Builder
	for _, n := range named {
		if !n.Dropped {
			continue
		}
		fmt.Fprintf(&what, "%s:%d+%d ", n.Fragment, n.Offset, n.Rows)
		for r := n.Offset; r < n.Offset+n.Rows; r++ {
			rows[n.Fragment] = append(rows[n.Fragment], uint32(r))
		}
	}
	if len(rows) == 0 {
		return frags, "", nil
	}
	out := slices.Clone(frags)
	for i := range out {
		r := rows[out[i].Key]
		if len(r) == 0 {
			continue
		}
		slices.Sort(r)
		r = slices.Compact(r)
		d := table.Deletion{Key: table.DeletionKey(out[i].ID, v), Count: int64(len(r))}
		if err := b.PutIfAbsent(ctx, d.Key, table.EncodeDeletions(r)); err != nil {
			return nil, "", err
		}
		out[i].Deletion = &d
	}
	return out, what.String(), nil
}

// keysOfFragments reads the keys (columns names of schema) of the rows of
// frags (table.KeysOf: checked when written, so a null or a key twice,
// from an entry damaged since, does not stop the merge).
func keysOfFragments(ctx context.Context, t *Table, schema *arrow.Schema, names []string, frags []table.Fragment) (*table.KeySet, error) {
	own := make([]table.Fragment, len(frags))
	for i, f := range frags {
		f.ID = uint64(i)
		own[i] = f
	}
	var batches []arrow.RecordBatch
	defer func() { releaseAll(batches) }()
	for rec, err := range table.SnapshotOf(t.b, schema, own).Scan(ctx, table.ScanOptions{Parallelism: t.opts.ReadParallelism}) {
		if err != nil {
			return nil, err
		}
		rec.Retain()
		batches = append(batches, rec)
	}
	ks, err := table.KeysOf(schema, names, batches)
	if err != nil {
		return nil, errors.Join(errors.New("commit: the keys of a shard's upserts"), err)
	}
	return ks, nil
}
