package engine

import (
	"context"
	"errors"
	"time"

	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
)

// AdoptOptions shape the adoption of one shard.
type AdoptOptions struct {
	// SetAsideLost gives up the shard's WAL entries that are missing or
	// damaged (an operator's repair: see ShardOptions.SetAsideLost).
	SetAsideLost bool
	// Writer names the adopter in its commits (default: the DB's writer,
	// "adopting" the shard).
	Writer string
	// Tune, when set, is the adopter's shard options (a harness's), which
	// the fields above then amend.
	Tune *ShardOptions
}

// Adopt opens shard as its owner would (a new epoch, fencing any owner
// still running), replays its WAL above the flushed position, flushes and
// merges everything, and closes it (walshard.Adopt), telling the listener.
func (db *DB) Adopt(ctx context.Context, shard string, o AdoptOptions) (AdoptResult, error) {
	return db.adopt(ctx, shard, o, time.Time{})
}

func (db *DB) adopt(ctx context.Context, shard string, o AdoptOptions, quietFrom time.Time) (AdoptResult, error) {
	so := ShardOptions{Commit: db.opts.Commit}
	if o.Tune != nil {
		so = *o.Tune
	}
	so.SetAsideLost = so.SetAsideLost || o.SetAsideLost
	if o.Writer != "" || o.Tune == nil {
		so.Commit.Writer = o.Writer
	}
	if so.Commit.Writer == "" {
		so.Commit.Writer = db.opts.Writer + " (adopting " + shard + ")"
	}
	res, err := walshard.Adopt(ctx, db.b, shard, &so)
	db.opts.Listener.AdoptionEnd(AdoptionInfo{Table: db.opts.Name, Shard: shard, QuietFrom: quietFrom, Result: res, Err: err})
	return res, err
}

// RepairResult is what Repair did: the versions it took back, and, with
// DropMissing, the fragments it gave up.
type RepairResult struct {
	compactor.RepairResult
	Dropped []format.Fragment
}

// Repair makes the newest version readable again where that loses
// nothing (compactor.Repair); with dropMissing, it gives up the fragments
// whose data is gone for good when nothing else can (compactor.DropMissing).
func (db *DB) Repair(ctx context.Context, dropMissing bool) (RepairResult, error) {
	co := db.opts.Commit
	res, err := compactor.Repair(ctx, db.b, &co, nil)
	out := RepairResult{RepairResult: res}
	if errors.Is(err, format.ErrMissingData) && dropMissing {
		out.Dropped, err = compactor.DropMissing(ctx, db.b, &co)
	}
	return out, err
}
