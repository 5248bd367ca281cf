package commit

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
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
// named lists the generation's named upserts, each marked dropped when
// the table records its name already (another shard's merge, or a direct
// upsert, installed a copy: a retry that reached another server), as
// format.Producers.DropNamed marks them on the version frags were made
// for: frags hold none of a dropped one's rows. The merge records the
// others (Transaction.Named), as a merge of appends does; on a version
// where the marks no longer hold (a name installed meanwhile) it is a
// retryable conflict, for frags to be made again.
//
// known, when not nil, is the keys of frags' rows under the schema of the
// version t was opened at, which the caller held when it wrote them (the
// merge then reads none of frags back); nil, or another schema by the
// time the merge commits, reads them from frags.
func (t *Table) MergeKeyed(ctx context.Context, keys []string, frags []format.Fragment, mark format.ShardMerge, named []format.NamedRows, known *table.KeySet) (UpsertResult, error) {
	var pl upsertPlan
	var ks *table.KeySet
	var ksSchema *arrow.Schema
	if known != nil {
		ks, ksSchema = known, t.Current().Manifest().Schema()
	}
	var rows int64
	for _, f := range frags {
		rows += f.Rows
	}
	var replaced int64
	res, err := t.drive(ctx, driveOptions{fromHandle: true, pause: true}, func(ctx context.Context, snap *table.Snapshot, _ error) (Plan, error) {
		m := snap.Manifest()
		switch cur := m.Shards[mark.Shard]; {
		case cur.Epoch > mark.Epoch:
			return Plan{}, &ConflictError{Ours: format.Transaction{Kind: format.KindMerge, Shard: mark.Shard, Epoch: mark.Epoch}, Version: m.Version,
				Reason: fmt.Sprintf("shard %q is owned by epoch %d; this merge is from epoch %d (fenced)", mark.Shard, cur.Epoch, mark.Epoch)}
		case cur.Watermark >= mark.Watermark:
			return Plan{Done: true}, nil
		}
		p := Plan{Txn: format.Transaction{Kind: format.KindMerge, CommitID: format.NewID(), ReadVersion: m.Version,
			Shard: mark.Shard, Watermark: mark.Watermark, Epoch: mark.Epoch, Seq: mark.Seq, WAL: mark.WAL, Added: frags}, written: t.opts.Now()}
		if len(named) > 0 {
			if !sameDrops(m.Producers.DropNamed(named), named) {
				return Plan{}, &ConflictError{Ours: p.Txn, Version: m.Version, Retryable: true,
					Reason: "a named upsert of the generation was installed meanwhile, or forgotten: its rows are to be copied again"}
			}
			p.Txn.Named = named
		}
		replaced = 0
		names, ok := table.CurrentNames(m.Schema(), keys)
		if !ok {
			return p, nil
		}
		if ks == nil || !ksSchema.Equal(m.Schema()) {
			var err error
			if ks, err = keysOfFragments(ctx, t, m.Schema(), names, frags); err != nil {
				return Plan{}, err
			}
			ksSchema, pl = m.Schema(), upsertPlan{}
		}
		matches, err := pl.plan(ctx, snap, ks, t.opts.ReadParallelism)
		if err != nil {
			return Plan{}, err
		}
		p.Txn.Keys = keys
		p.Txn.Deletions, p.bodies, replaced, err = t.writeVectors(ctx, snap, matches)
		return p, err
	})
	switch {
	case err != nil:
		return UpsertResult{}, err
	case res.Done:
		return UpsertResult{Result: res}, nil
	}
	return UpsertResult{Result: res, Inserted: rows, Replaced: replaced}, nil
}

// sameDrops tells whether a and b mark the same named rows dropped.
func sameDrops(a, b []format.NamedRows) bool {
	return slices.EqualFunc(a, b, func(x, y format.NamedRows) bool { return x.AppendKey == y.AppendKey && x.Dropped == y.Dropped })
}

// keysOfFragments reads the keys (columns names of schema) of the rows of
// frags (table.KeysOf: checked when written, so a null or a key twice,
// from an entry damaged since, does not stop the merge).
func keysOfFragments(ctx context.Context, t *Table, schema *arrow.Schema, names []string, frags []format.Fragment) (*table.KeySet, error) {
	own := make([]format.Fragment, len(frags))
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
