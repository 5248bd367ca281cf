package engine

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
)

// Create creates a table in b with schema and, if given, initial rows, as
// version 1 (commit.Create): format.ErrExists when a table is there. With
// key, it is safe to send again after an unknown outcome: when version 1 is
// this create, it answers that version with duplicate set.
func Create(ctx context.Context, b blob.Bucket, schema *arrow.Schema, writer string, key *format.Idempotency, batches ...arrow.RecordBatch) (m *format.Manifest, duplicate bool, err error) {
	o := &CommitOptions{Writer: writer}
	if key != nil {
		return commit.CreateOnce(ctx, b, schema, nil, o, *key, batches...)
	}
	m, err = commit.Create(ctx, b, schema, nil, o, batches...)
	return m, false, err
}

// verbTable opens the table for one direct commit of verb, named in the
// commit's writer ("WRITER (verb)"). With drain, the process's own shard
// is drained first (flushed and merged), so that the rows it acknowledged
// are in the version the verb reads: a verb that chooses rows by a filter
// or a key must see them.
func (db *DB) verbTable(ctx context.Context, verb string, drain bool) (*commit.Table, error) {
	if drain {
		s, err := db.OwnShard(ctx)
		if err != nil {
			return nil, err
		}
		if s != nil {
			if err := s.Drain(ctx); err != nil {
				return nil, err
			}
		}
	}
	o := db.opts.Commit
	o.Writer = db.opts.Writer + " (" + verb + ")"
	return commit.OpenTable(ctx, db.b, &o)
}

// Update sets columns of the rows pred matches, in one commit
// (commit.Table.Update), after draining the process's shard.
func (db *DB) Update(ctx context.Context, pred expr.Predicate, set []expr.Assignment) (UpdateResult, error) {
	t, err := db.verbTable(ctx, "update", true)
	if err != nil {
		return UpdateResult{}, err
	}
	return t.Update(ctx, pred, set)
}

// Delete deletes the rows pred matches, in one commit
// (commit.Table.Delete), after draining the process's shard; it answers
// how many.
func (db *DB) Delete(ctx context.Context, pred expr.Predicate) (Result, int64, error) {
	t, err := db.verbTable(ctx, "delete", true)
	if err != nil {
		return Result{}, 0, err
	}
	return t.Delete(ctx, pred)
}

// RowsReader reads a write's rows (an upsert's, an overwrite's) under the
// table's schema, and the write's name (nil: unnamed), once the schema is
// known: the batches are the caller's to release.
type RowsReader func(schema *arrow.Schema) ([]arrow.RecordBatch, *format.Idempotency, error)

// Upsert commits the rows that read gives, replacing the table's rows with
// their keys, in one direct commit (commit.Table.UpsertOnce), after draining the process's shard. Sent again under its name,
// it answers the first one's version and replaces nothing.
func (db *DB) Upsert(ctx context.Context, keys []string, read RowsReader) (UpsertResult, error) {
	t, err := db.verbTable(ctx, "upsert", true)
	if err != nil {
		return UpsertResult{}, err
	}
	recs, key, err := read(t.Current().Manifest().Schema())
	if err != nil {
		return UpsertResult{}, err
	}
	return t.UpsertOnce(ctx, key, keys, recs...)
}

// UpsertWith merges the rows read gives into the table by the key columns
// keys, as the clauses say (commit.Table.UpsertWith), in one direct
// commit, after draining the process's shard. Sent again under its name,
// it answers the first one's version and changes nothing.
func (db *DB) UpsertWith(ctx context.Context, keys []string, c UpsertClauses, read RowsReader) (UpsertResult, error) {
	t, err := db.verbTable(ctx, "merge", true)
	if err != nil {
		return UpsertResult{}, err
	}
	recs, key, err := read(t.Current().Manifest().Schema())
	if err != nil {
		return UpsertResult{}, err
	}
	return t.UpsertWith(ctx, key, keys, c, recs...)
}

// Overwrite replaces every row of the table with the rows read gives,
// keeping the schema, in one direct commit (commit.Table.OverwriteRows),
// after draining the process's shard, so that the rows it acknowledged
// before are replaced too. Sent again under its name, it answers the first
// one's version and overwrites nothing.
func (db *DB) Overwrite(ctx context.Context, read RowsReader) (Result, error) {
	t, err := db.verbTable(ctx, "overwrite", true)
	if err != nil {
		return Result{}, err
	}
	recs, key, err := read(t.Current().Manifest().Schema())
	if err != nil {
		return Result{}, err
	}
	return t.OverwriteRows(ctx, key, recs...)
}

// Restore commits a version whose rows are version v's
// (commit.Table.Restore).
func (db *DB) Restore(ctx context.Context, v uint64) (Result, error) {
	t, err := db.verbTable(ctx, "restore", false)
	if err != nil {
		return Result{}, err
	}
	return t.Restore(ctx, v)
}

// CreateIndex builds the key index of column (commit.Table.CreateIndex).
func (db *DB) CreateIndex(ctx context.Context, column string) (Result, error) {
	t, err := db.verbTable(ctx, "index", false)
	if err != nil {
		return Result{}, err
	}
	return t.CreateIndex(ctx, column)
}
