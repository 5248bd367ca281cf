package walshard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard/fleetmerge"
	"github.com/stratadb/strata/walshard/wal"
)

// Dropping a table under its writers. A drop deletes every object of the
// table, WAL entries and epoch claims included: a writer that goes on
// writing finds its positions free, and nothing it writes collides. So a
// drop first fences every shard — it claims each one's next epoch, as a
// new owner would (FenceForDrop) — and waits DropWait before it deletes
// anything: a writer reads the claims before any WAL write made
// epochRecheck or more after its last read, and after any write that
// landed that late, so every write it acknowledges after the wait was
// checked against the drop's claim, or against no claim of its own at
// all once the objects went. What it acknowledged before is the table's,
// and the drop deletes it with the rest: those appends came before the
// drop. Its flushes read the claims as late, and every state it writes
// carries the table's id (State.Table), so that a fleet merge of a table
// created again under the name passes over a state written after all.

// ErrDropped: the table this handle writes to was dropped (and maybe
// created again under its name) since the handle opened it. The handle
// acknowledges nothing more; open the new table to write to it. Errors
// with it are also ErrFenced, for callers that stop on that.
var ErrDropped = errors.New("walshard: the table was dropped")

// DropWait is how long a drop waits between fencing the shards and
// deleting: a writer's reads of the claims are at most this far apart
// while it writes.
const DropWait = epochRecheck + 5*time.Second

// dropClaim is the body of the epoch claims a drop makes.
const dropClaim = "strata drop (the table is being dropped)"

// droppedError names the shard whose table was dropped.
type droppedError struct {
	shard string
	epoch uint64
}

func (e *droppedError) Error() string {
	return fmt.Sprintf("walshard: shard %q (epoch %d): the table was dropped since this writer opened it: no more appends are acknowledged", e.shard, e.epoch)
}

// Is makes errors.Is true for ErrDropped and ErrFenced.
func (e *droppedError) Is(target error) bool { return target == ErrDropped || target == ErrFenced }

// fencedOrDropped fences the handle, telling a drop (a drop's claim is
// the newest, claim is its key, or the table is gone or has another id)
// from a newer owner.
func (s *Shard) fencedOrDropped(ctx context.Context, claim string) error {
	dropped := false
	if claim != "" {
		if body, err := s.b.Get(ctx, claim); err == nil && string(body) == dropClaim {
			dropped = true
		}
	}
	if !dropped {
		m, err := table.ReadLatest(ctx, s.b)
		dropped = errors.Is(err, format.ErrNotFound) || err == nil && s.l.Table != "" && m.TableID != s.l.Table
	}
	if !dropped {
		return s.setFenced()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.fenced == nil {
		s.mu.fenced = &droppedError{shard: s.id, epoch: s.epoch}
		s.broadcastLocked()
	}
	return s.mu.fenced
}

// FenceForDrop claims the next epoch of every shard of the table in b (a
// shard registered, or with a folder under _shards/), as the first step
// of dropping it: each writer's next read of its shard's claims fences
// it, with ErrDropped. The caller then waits DropWait before it deletes
// the table's objects. It returns the shards fenced.
func FenceForDrop(ctx context.Context, b blob.Bucket) ([]string, error) {
	ids, err := fleetmerge.Registered(ctx, b)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	for token := ""; ; {
		page, err := b.ListDir(ctx, format.ShardsDir, token, 0)
		if err != nil {
			return nil, err
		}
		for _, f := range page.Folders {
			id := f[len(format.ShardsDir) : len(f)-1]
			if !seen[id] && wal.CheckShardID(id) == nil {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		if token = page.Next; token == "" {
			break
		}
	}
	for _, id := range ids {
		s := &Shard{b: b, l: wal.NewLayout(id), id: id}
		s.opts.Commit.Writer = dropClaim
		if _, err := s.claimEpoch(ctx, 0); err != nil {
			return nil, fmt.Errorf("walshard: fencing shard %q for the drop: %w", id, err)
		}
	}
	return ids, nil
}
