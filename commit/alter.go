package commit

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// Alter changes the table's schema, or its cluster key (an
// evolve.ClusterBy change; setting the key it has commits nothing:
// Result.Done), in one commit, by metadata alone: no
// fragment is read or written (see evolve.AlterSchema for the changes, and
// table's evolve.go for how fragments written before read after). Writers
// holding the schema from before keep appending: their rows are stored
// under the stored names they know, which the new schema resolves. A
// change the table cannot take is an error wrapping
// evolve.ErrBadSchemaChange, and nothing is committed; another schema
// change landing first makes Alter plan again against it, up to
// MaxReplans times. A change that drops a column answers only once no
// shard can acknowledge rows under the schema before (outwaitLeases), so
// rows sent after it answered that name the column are refused by name.
func (t *Table) Alter(ctx context.Context, changes ...evolve.ColumnChange) (Result, error) {
	if len(changes) == 0 {
		return Result{}, fmt.Errorf("%w: no change given", evolve.ErrBadSchemaChange)
	}
	schemaChanges, cluster, err := evolve.SplitChanges(changes)
	if err != nil {
		return Result{}, err
	}
	var before, next *arrow.Schema
	var planned *format.Manifest
	res, err := t.drive(ctx, driveOptions{}, func(ctx context.Context, snap *table.Snapshot, _ error) (Plan, error) {
		m := snap.Manifest()
		planned = m
		before, next = m.Schema(), m.Schema()
		txn := format.Transaction{Kind: format.KindAlter, CommitID: format.NewID(), ReadVersion: snap.Version(), SchemaIPC: m.SchemaIPC}
		if len(schemaChanges) > 0 {
			var err error
			if next, err = evolve.AlterSchema(before, schemaChanges); err != nil {
				return Plan{}, err
			}
			if txn.SchemaIPC, err = evolve.EncodeSchema(next); err != nil {
				return Plan{}, err
			}
			txn.Dropped = slices.Clone(evolve.RetiredNames(next)[len(evolve.RetiredNames(before)):])
		}
		if cluster != nil {
			key, err := evolve.ClusterKey(next, cluster.Columns)
			if err != nil {
				return Plan{}, err
			}
			if len(key) > 0 && len(m.Indexes) > 0 {
				return Plan{}, fmt.Errorf("%w: %w", evolve.ErrBadSchemaChange, ErrClusteredIndex)
			}
			if len(schemaChanges) == 0 && slices.Equal(key, m.ClusterBy) {
				return Plan{Done: true}, nil // the key it has: nothing to commit
			}
			txn.Cluster = &format.Clustering{Columns: key}
		}
		for _, c := range changes {
			txn.Changes = append(txn.Changes, c.String())
		}
		return Plan{Txn: txn}, nil
	})
	if err != nil {
		return Result{}, err
	}
	if res.Done {
		res.Manifest = planned
		return res, nil
	}
	return res, t.outwaitLeases(ctx, res.Version, before, next)
}

// ErrClusteredIndex: a table has a cluster key or a key index, not both.
// A key index finds a row where compaction put it among the rows of its
// sources, in their order; a sort by the cluster key moves it.
var ErrClusteredIndex = errors.New("commit: a table with a key index cannot have a cluster key, nor one with a cluster key a key index (clear the cluster key, strata alter --no-cluster, to build an index; a key index cannot be dropped)")

// applyAlter gives next (a copy of cur) the schema txn made. An index
// follows its column through a rename (found by stored name) and goes
// with it when it is dropped.
func applyAlter(cur, next *format.Manifest, txn *format.Transaction) error {
	next.SchemaIPC = txn.SchemaIPC
	if err := format.Refresh(next); err != nil {
		return err
	}
	next.ClusterBy = evolve.KeepClusterKey(next.Schema(), next.ClusterBy)
	if txn.Cluster != nil {
		if len(txn.Cluster.Columns) > 0 && len(next.Indexes) > 0 {
			return fmt.Errorf("%w: %w", evolve.ErrBadSchemaChange, ErrClusteredIndex)
		}
		next.ClusterBy = evolve.KeepClusterKey(next.Schema(), txn.Cluster.Columns)
	}
	old, now := cur.Schema(), next.Schema()
	byStored := map[string]string{}
	for _, f := range now.Fields() {
		byStored[evolve.StoredName(f)] = f.Name
	}
	var kept []format.Index
	for _, ix := range next.Indexes {
		if name, ok := renamedTo(old, byStored, ix.Column); ok {
			ix.Column = name
			kept = append(kept, ix)
		}
	}
	next.Indexes = kept
	return nil
}

// renamedTo is the name column col of schema old has in the schema whose
// columns byStored finds by stored name; false when it was dropped.
func renamedTo(old *arrow.Schema, byStored map[string]string, col string) (string, bool) {
	idx := old.FieldIndices(col)
	if len(idx) != 1 {
		return "", false
	}
	name, ok := byStored[evolve.StoredName(old.Field(idx[0]))]
	return name, ok
}
