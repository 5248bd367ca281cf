package engine

import (
	"context"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// Alter changes the table's schema (commit.Table.Alter) and renews the
// process's shard, so that what it takes next is read under the new
// schema. Rows its WAL acknowledged before are replayed under the new
// schema too (a column added reads null, a renamed one under its new
// name).
func (db *DB) Alter(ctx context.Context, changes ...evolve.ColumnChange) (Result, error) {
	t, err := db.table(ctx)
	if err != nil {
		return Result{}, err
	}
	res, err := t.Alter(ctx, changes...)
	if err != nil {
		return res, err
	}
	db.shard.renew(res.Manifest)
	return res, nil
}

// RenewSchema reads the table's latest version and, when its schema is
// newer than the one the process's shard opened with (another process
// changed it), closes the shard: it opens again, under the new schema, on
// its next use. It tells whether it did. A writer whose rows the shard
// refused for their columns calls it before sending them again.
func (db *DB) RenewSchema(ctx context.Context) (bool, error) {
	s := db.shard.current()
	if s == nil {
		return false, nil
	}
	snap, err := table.Open(ctx, db.b, nil)
	if err != nil {
		return false, err
	}
	return db.shard.renew(snap.Manifest()), nil
}

// renew closes the open shard when m's schema is newer than its own.
func (o *shardOwner) renew(m *format.Manifest) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.mu.s
	if s == nil || m == nil || evolve.SchemaID(m.Schema()) <= evolve.SchemaID(s.Schema()) {
		return false
	}
	o.db.opts.Log.Info("the table's schema changed; opening the shard again under it",
		"table", o.db.opts.Name, "shard", s.ID(), "schema_id", evolve.SchemaID(m.Schema()))
	s.Close()
	o.mu.s = nil
	return true
}

// renewStale closes s, a shard that found the table's schema newer than
// its own, if it is still the open one: it opens again under the newest
// schema on its next use.
func (o *shardOwner) renewStale(s *ShardHandle) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mu.s != s {
		return
	}
	o.db.opts.Log.Info("the table's schema changed; opening the shard again under it",
		"table", o.db.opts.Name, "shard", s.ID())
	s.Close()
	o.mu.s = nil
}
