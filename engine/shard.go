package engine

import (
	"context"
	"errors"
	"iter"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/wal"
)

// reopenEvery bounds how often a DB opens again a shard that a newer
// owner fenced; damagedRetry how often it tries again to open one whose
// log the store damaged, unless a repair claimed a newer epoch meanwhile.
const (
	reopenEvery  = 5 * time.Second
	damagedRetry = 30 * time.Second
)

// shardOwner holds the process's own WAL shard of the table: opened (a
// new epoch) on first use, and again once a newer owner fenced it.
type shardOwner struct {
	db *DB
	mu struct {
		sync.Mutex
		s            *ShardHandle
		reopened     time.Time
		damaged      error // the last open failed on a damaged log
		damagedAt    time.Time
		damagedEpoch uint64
	}
}

// ErrNoShard: the DB was opened without a shard (Options.Shard).
var ErrNoShard = errors.New("engine: this process writes the table without a shard")

// open returns the shard, opening it when it is not open or was fenced.
func (o *shardOwner) open(ctx context.Context) (*ShardHandle, error) {
	db := o.db
	if db.opts.Shard.Shard == "" {
		return nil, ErrNoShard
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	db.mu.Lock()
	closed := db.mu.closed
	db.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if s := o.mu.s; s != nil && errors.Is(s.FencedBy(), walshard.ErrDropped) {
		// Fenced by a drop of the table: not a newer owner, and nothing to
		// open again.
		return nil, s.FencedBy()
	}
	if s := o.mu.s; s != nil && s.Fenced() && time.Since(o.mu.reopened) >= reopenEvery {
		// A newer owner took the shard over: the compactor Job adopting
		// it, an operator's repair, or another process with this shard id.
		// What this handle acknowledged is in the WAL, replayed by that
		// owner; opening the shard again claims the next epoch. Not more
		// often than reopenEvery, so that two processes given the same id
		// do not take it from each other on every request.
		db.opts.Log.Warn("the table's shard was taken over by a newer owner; opening it again",
			"table", db.opts.Name, "shard", s.ID(), "epoch", s.Epoch())
		s.Close()
		o.mu.s, o.mu.reopened = nil, time.Now()
	}
	if o.mu.s != nil {
		return o.mu.s, nil
	}
	so := db.opts.Shard
	so.MergeInterval = 0                     // the DB merges (Options.MergeInterval)
	so.Listener = db.shardListener(so.Shard) // its events are the DB's
	if o.mu.damaged != nil && time.Since(o.mu.damagedAt) < damagedRetry {
		if e, err := wal.NewestEpoch(ctx, db.b, so.Shard); err != nil || e == o.mu.damagedEpoch {
			return nil, o.mu.damaged
		}
	}
	s, err := walshard.Open(ctx, db.b, &so)
	if errors.Is(err, walshard.ErrMissingEntry) || errors.Is(err, wal.ErrCorruptEntry) {
		o.mu.damaged, o.mu.damagedAt = err, time.Now()
		o.mu.damagedEpoch, _ = wal.NewestEpoch(ctx, db.b, so.Shard)
	}
	if err != nil {
		return nil, err
	}
	o.mu.s, o.mu.damaged = s, nil
	return s, nil
}

// current returns the open shard, or nil.
func (o *shardOwner) current() *ShardHandle {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.mu.s
}

func (o *shardOwner) close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mu.s == nil {
		return nil
	}
	err := o.mu.s.Close()
	o.mu.s = nil
	return err
}

// Shard returns the process's own shard, opening it; ErrNoShard when the
// DB has none.
func (db *DB) Shard(ctx context.Context) (*ShardHandle, error) { return db.shard.open(ctx) }

// OpenShard returns the process's own shard if it is open, else nil.
func (db *DB) OpenShard() *ShardHandle { return db.shard.current() }

// OwnShard returns the process's own shard when it is open or when this
// process wrote through it before (a restart: opening it again replays
// the rows its WAL acknowledged); nil when it never wrote to the table.
func (db *DB) OwnShard(ctx context.Context) (*ShardHandle, error) {
	if s := db.shard.current(); s != nil && !s.Fenced() {
		return s, nil
	}
	if db.opts.Shard.Shard == "" {
		return nil, nil
	}
	_, err := db.b.Attributes(ctx, format.FleetShardsDir+db.opts.Shard.Shard)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return db.shard.open(ctx)
}

// Ack is what an append learns: where its rows are (the WAL position of
// an append through a shard; the version of a direct one), and, for a
// named append sent again, that the first one stored them (Duplicate).
type Ack struct {
	Rows      int64
	Shard     string // "": a direct append
	Position  uint64
	Version   uint64
	Duplicate bool
	Replaced  int64 // a direct upsert's: the rows it replaced
	Rebases   int   // a direct append's: the commits it went above (Result.Rebases)
}

// AppendOptions shape an append.
type AppendOptions struct {
	// Key, when not nil, names the append (see format.Idempotency): sent
	// again under its name it stores nothing and answers the first
	// outcome.
	Key *format.Idempotency
	// Conformed: the batches passed evolve.Conform against the table's
	// schema already (package ingest's readers do), so the append takes
	// them as they are: an append through a shard is checked once.
	Conformed bool
	// Keys, when set, make the append an upsert by those key columns
	// (walshard.Shard.Upsert): through the shard its rows are acknowledged
	// once durable in the WAL and replace the table's rows with their keys
	// when merged; without a shard, in one commit (commit.Table.Upsert).
	Keys []string
}

// Append appends batches, all or none: through the process's shard when
// the DB has one (acknowledged once durable in its WAL), else in one
// commit.
func (db *DB) Append(ctx context.Context, o AppendOptions, batches ...arrow.RecordBatch) (Ack, error) {
	var rows int64
	for _, b := range batches {
		rows += b.NumRows()
	}
	if db.opts.Shard.Shard != "" {
		return db.appendThroughShard(ctx, o, rows, batches)
	}
	t, err := db.table(ctx)
	if err != nil {
		return Ack{}, err
	}
	var res Result
	if o.Keys != nil {
		// An upsert sent again replaces its own rows: no name is needed.
		up, err := t.Upsert(ctx, o.Keys, batches...)
		return Ack{Rows: up.Inserted, Version: up.Version, Replaced: up.Replaced}, err
	}
	if o.Key != nil {
		res, err = t.AppendOnce(ctx, *o.Key, batches...)
		if res.Duplicate {
			rows = res.Rows
		}
	} else {
		res, err = t.Append(ctx, batches...)
	}
	return Ack{Rows: rows, Version: res.Version, Duplicate: res.Duplicate, Rebases: res.Rebases}, err
}

// Flush seals the process's shard's memtable into a generation (0: it
// was empty, or the DB has no open shard).
func (db *DB) Flush(ctx context.Context) (uint64, error) {
	s, err := db.OwnShard(ctx)
	if err != nil || s == nil {
		return 0, err
	}
	return s.Flush(ctx)
}

// Drain flushes the process's shard and merges until nothing of it awaits
// merging (a server shutting down).
func (db *DB) Drain(ctx context.Context) error {
	s := db.shard.current()
	if s == nil {
		return nil
	}
	return s.Drain(ctx)
}

// ScanFresh reads the latest version and every row acknowledged through
// any shard and not yet merged, each once.
func (db *DB) ScanFresh(ctx context.Context, opts table.ScanOptions) iter.Seq2[arrow.RecordBatch, error] {
	return walshard.ScanFleet(ctx, db.b, opts)
}

// appendThroughShard appends through the process's shard. A shard that
// found the table's schema newer than its own wrote nothing
// (walshard.ErrSchemaChanged): it opens again under the new schema, and
// the batches are conformed to it and sent again, once (a column the
// change took away is then refused by name).
func (db *DB) appendThroughShard(ctx context.Context, o AppendOptions, rows int64, batches []arrow.RecordBatch) (Ack, error) {
	for again := false; ; again = true {
		s, err := db.shard.open(ctx)
		if err != nil {
			return Ack{}, err
		}
		ack := walshard.Ack{Rows: rows}
		conformed := o.Conformed && !again
		switch {
		case o.Keys != nil:
			ack, err = s.UpsertOnce(ctx, o.Key, o.Keys, conformed, batches...)
		case conformed:
			ack, err = s.AppendConformed(ctx, o.Key, batches...)
		case o.Key != nil:
			ack, err = s.AppendOnce(ctx, *o.Key, batches...)
		default:
			err = s.Append(ctx, batches...)
		}
		if errors.Is(err, walshard.ErrSchemaChanged) {
			db.shard.renewStale(s)
			if !again {
				continue
			}
		}
		return Ack{Rows: ack.Rows, Shard: s.ID(), Position: ack.Position, Duplicate: ack.Duplicate}, err
	}
}
