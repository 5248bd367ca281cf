package walshard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratadb/strata/internal/plant"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
)

// ErrSchemaChanged: the table's schema changed since the shard opened,
// and the shard no longer acknowledges rows (nothing of the append was
// written). Open the shard again, under the new schema, and send the rows
// again: a column the change took away is then refused by name.
var ErrSchemaChanged = errors.New("walshard: the table's schema changed since the shard opened")

// checkSchema makes sure, before a WAL write the shard will acknowledge
// begins, that the handle's schema was the table's newest within
// Options.SchemaLease: when its last check is older, it looks for the
// marker of the next schema id (one request) and, if it is there, at the
// newest version, by name past what a listing shows. See
// evolve.SchemaLease for why this keeps acknowledged values from being
// lost to a schema change. A check that took longer than the lease and
// its slack is made again.
func (s *Shard) checkSchema(ctx context.Context) error {
	for {
		s.mu.Lock()
		checked, stale := s.mu.wal.schemaChecked, s.mu.wal.schemaStale
		s.mu.Unlock()
		if stale != nil {
			return stale
		}
		start := s.now()
		if start.Sub(checked) < s.opts.SchemaLease || plant.On(plant.ShardSkipsSchemaCheck) {
			return nil
		}
		if err := s.checkSchemaOnce(ctx, start); err != nil {
			return err
		}
		// A check that took as long as a change that takes values away
		// waits after its commit (the lease and its slack: a slow
		// store) may have seen the table before such a change that
		// answered since: made again.
		if s.now().Sub(start) < s.opts.SchemaLease+evolve.SchemaLeaseSlack {
			return nil
		}
	}
}

// checkSchemaOnce looks for the marker of the next schema id, and at the
// newest version if it is there; start is when it began.
func (s *Shard) checkSchemaOnce(ctx context.Context, start time.Time) error {
	id := evolve.SchemaID(s.schema)
	marked, err := evolve.SchemaMarked(ctx, s.b, id+1)
	if err != nil {
		return fmt.Errorf("walshard: shard %q: %w", s.id, err)
	}
	if marked {
		newest, err := s.newestSchemaID(ctx)
		if err != nil {
			return fmt.Errorf("walshard: shard %q: reading the table's schema: %w", s.id, err)
		}
		if newest > id {
			err := fmt.Errorf("walshard: shard %q opened under schema %d, and the table's is %d now: %w", s.id, id, newest, ErrSchemaChanged)
			s.mu.Lock()
			s.mu.wal.schemaStale = err
			s.mu.Unlock()
			return err
		}
	}
	s.mu.Lock()
	if start.After(s.mu.wal.schemaChecked) {
		s.mu.wal.schemaChecked = start
	}
	s.mu.Unlock()
	return nil
}

// newestSchemaID reads the schema id of the table's newest version,
// found by a listing and then by name past it.
func (s *Shard) newestSchemaID(ctx context.Context) (uint64, error) {
	m, err := table.ReadLatest(ctx, s.b)
	if err != nil {
		return 0, err
	}
	if m, err = table.Newest(ctx, s.b, m); err != nil {
		return 0, err
	}
	return evolve.SchemaID(m.Schema()), nil
}
