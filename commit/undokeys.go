package commit

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// laterKeys are the keys a keyed commit after an undone one wrote.
type laterKeys struct {
	version uint64
	keys    *table.KeySet
	schema  *arrow.Schema // the table's when they were read
}

// keysWrittenAfter reads the keys every keyed commit after version v up
// to cur wrote (an upsert, a merge of a shard's upserts): the rows an
// undo of v gives back must not hold them. A version already collected is
// passed over: the undo cannot learn what it wrote.
func keysWrittenAfter(ctx context.Context, b blob.Bucket, v uint64, cur *format.Manifest, o Options) ([]laterKeys, error) {
	var out []laterKeys
	schema := cur.Schema()
	for u := v + 1; u <= cur.Version; u++ {
		var t *format.Transaction
		err := retryTransient(ctx, o, func() (err error) { t, err = table.ReadTransaction(ctx, b, u); return err })
		if errors.Is(err, format.ErrVersionNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(t.Keys) == 0 || len(t.Added) == 0 || (t.Kind != format.KindUpsert && t.Kind != format.KindMerge) {
			continue
		}
		names, ok := table.CurrentNames(schema, t.Keys)
		if !ok {
			continue // a key column dropped since: no row holds it now
		}
		var ks *table.KeySet
		err = retryTransient(ctx, o, func() (err error) { ks, err = table.KeysWritten(ctx, b, schema, names, t.Added); return err })
		if errors.Is(err, blob.ErrNotFound) {
			continue // its rows are gone (taken back in turn): they replaced nothing that stands
		}
		if err != nil {
			return nil, err
		}
		out = append(out, laterKeys{version: u, keys: ks, schema: schema})
	}
	return out, nil
}

// laterKeysOf is keysWrittenAfter m's version up to the latest.
func laterKeysOf(ctx context.Context, b blob.Bucket, m *format.Manifest, o Options) ([]laterKeys, error) {
	var cur *format.Manifest
	if err := retryTransient(ctx, o, func() (err error) { cur, err = table.ReadLatest(ctx, b); return err }); err != nil {
		return nil, err
	}
	return keysWrittenAfter(ctx, b, m.Version, cur, o)
}

// replacedRows returns the rows of fragment f (all of them, deleted or
// not) that hold a key one of later wrote, in ascending order.
func replacedRows(ctx context.Context, b blob.Bucket, f *format.Fragment, later []laterKeys, o Options) ([]uint32, error) {
	var rows []uint32
	own := *f
	own.Deletion = nil
	for _, lk := range later {
		var found map[uint64][]uint32
		if err := retryTransient(ctx, o, func() (err error) {
			found, err = table.SnapshotOf(b, lk.schema, []format.Fragment{own}).KeyRows(ctx, lk.keys, 1, nil)
			return err
		}); err != nil {
			return nil, fmt.Errorf("the rows of fragment %d whose keys v%d wrote again: %w", own.ID, lk.version, err)
		}
		rows = format.UnionSorted(rows, found[own.ID])
	}
	return rows, nil
}
