package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard/fleetmerge"
)

// DB is a process's handle on one table. Safe for concurrent use.
type DB struct {
	b    blob.Bucket
	opts Options

	// ctx is the DB's: background work runs on it; Close cancels it and
	// waits for bg.
	ctx    context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup

	shard shardOwner // the process's own WAL shard, when Options.Shard names one

	// One of each at a time in this process (ErrCompactionRunning,
	// ErrMergeRunning).
	compacting, merging atomic.Bool
	// fleet is what this DB's fleet merges remember between passes.
	fleet fleetmerge.Memory

	mu struct {
		sync.Mutex
		tbl     *commit.Table // for direct appends, opened on the first
		lastErr BackgroundErrorInfo
		lastAt  time.Time
		closed  bool // stop ran: no more shards, no more direct appends
		// bucketClosed: Close ran.
		bucketClosed bool
		pass         remembered // what maintenance passes remember
		failing      failingKinds
	}
}

// Errors of a DB.
var (
	// ErrClosed: the DB was closed.
	ErrClosed = errors.New("engine: closed")
	// ErrCompactionRunning: a compaction of the table by this DB is
	// running already.
	ErrCompactionRunning = errors.New("engine: a compaction of this table by this process is already running")
	// ErrMergeRunning: a merge of the table by this DB is running already.
	ErrMergeRunning = errors.New("engine: a merge of this table by this process is already running")
)

// Open opens the table in b (it must exist: format.ErrNotFound otherwise),
// and starts the background work the options ask for. Close ends it.
func Open(ctx context.Context, b blob.Bucket, o *Options) (*DB, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if _, err := table.LatestVersion(ctx, b); err != nil {
		return nil, err
	}
	return newDB(b, o), nil
}

// OpenNew is Open for a table that may not exist yet (a server opens the
// handle of a table a request is about to create).
func OpenNew(b blob.Bucket, o *Options) (*DB, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return newDB(b, o), nil
}

func newDB(b blob.Bucket, o *Options) *DB {
	db := &DB{b: b, opts: *o.EnsureDefaults()}
	db.ctx, db.cancel = context.WithCancel(context.Background())
	db.shard.db = db
	if db.opts.Shard.Shard != "" && db.opts.MergeInterval > 0 {
		db.Every("merge", db.opts.MergeInterval, db.mergeIfOwned)
	}
	return db
}

// Bucket is the table's bucket; Name the table's name in events.
func (db *DB) Bucket() blob.Bucket { return db.b }
func (db *DB) Name() string        { return db.opts.Name }

// Go runs fn on the DB's behalf in the background, on the DB's context,
// counted (Close waits for it), with a failure told to the listener
// (BackgroundError) and kept as the DB's last error, and a panic turned
// into one: a bug in background work must not take the process down.
func (db *DB) Go(what string, fn func(ctx context.Context) error) {
	db.bg.Go(func() {
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panicked: %v", r)
				}
			}()
			return fn(db.ctx)
		}()
		if err != nil && db.ctx.Err() == nil {
			db.backgroundError(what, err)
		}
	})
}

// Every runs fn every interval in the background until Close (the first
// time after one interval), backing off (doubling, up to ten intervals)
// after a failure, which is told as Go's are.
func (db *DB) Every(what string, interval time.Duration, fn func(ctx context.Context) error) {
	db.bg.Go(func() {
		wait := interval
		for {
			t := time.NewTimer(wait)
			select {
			case <-db.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panicked: %v", r)
					}
				}()
				return fn(db.ctx)
			}()
			switch {
			case db.ctx.Err() != nil:
				return
			case err != nil:
				db.backgroundError(what, err)
				wait = min(2*wait, 10*interval)
			default:
				wait = interval
			}
		}
	})
}

func (db *DB) backgroundError(what string, err error) {
	info := BackgroundErrorInfo{Table: db.opts.Name, What: what, Err: err}
	db.mu.Lock()
	db.mu.lastErr, db.mu.lastAt = info, db.opts.Now()
	db.mu.Unlock()
	db.opts.Listener.BackgroundError(info)
}

// LastError is the newest failure of the DB's background work, and when
// it happened (a zero time: none).
func (db *DB) LastError() (BackgroundErrorInfo, time.Time) {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.mu.lastErr, db.mu.lastAt
}

// stop ends the DB's background work and waits for it, and closes its
// shard; the bucket stays open.
func (db *DB) stop() error {
	db.mu.Lock()
	db.mu.closed = true
	db.mu.Unlock()
	db.cancel()
	db.bg.Wait()
	return db.shard.close()
}

// Close stops the DB's background work and waits for it, then closes its
// shard (acknowledged rows stay durable in the WAL: Drain first to merge
// them) and, with Options.CloseBucket, its bucket.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.mu.bucketClosed {
		db.mu.Unlock()
		return nil
	}
	db.mu.bucketClosed = true
	db.mu.Unlock()
	err := db.stop()
	if db.opts.CloseBucket {
		err = errors.Join(err, db.b.Close())
	}
	return err
}

// table returns the DB's handle for direct commits, opened on first use.
func (db *DB) table(ctx context.Context) (*commit.Table, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.mu.closed {
		return nil, ErrClosed
	}
	if db.mu.tbl != nil {
		return db.mu.tbl, nil
	}
	t, err := commit.OpenTable(ctx, db.b, &db.opts.Commit)
	if err != nil {
		return nil, err
	}
	db.mu.tbl = t
	return t, nil
}

func joinErrs(errs []error) error { return errors.Join(errs...) }
