package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/internal/backoff"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
)

// DropOptions shape a drop: Wait is how long other processes' writers are
// given to read the claims (DropWait when 0, none when negative); Found,
// when set, is called once the table is known to exist, before anything
// stops (a server forgets its handle there, so that requests from then
// on open a new one).
type DropOptions struct {
	Wait  time.Duration
	Found func()
}

// Drop deletes every object of the table, and stops the DB (its
// background work ends and its shard closes before anything goes; Close
// it after, to close its bucket). Every shard of the fleet is fenced
// first, and when any but the DB's own was, the other processes' writers
// (a fleet worker, another server) are given wait (DropWait when 0, none
// when negative) to read the claims: after that none acknowledges an
// append (see walshard.FenceForDrop). Then the manifests go, newest first
// (once the newest is gone, the table is), then the objects of the table's
// folder and of its reserved folders; its other folders may hold other
// tables ("runs/eval" under "runs"), which stay. format.ErrNotFound, and
// nothing stopped, when there is no table.
func (db *DB) Drop(ctx context.Context, o DropOptions) error {
	if _, err := table.LatestVersion(ctx, db.b); err != nil {
		return err
	}
	if o.Found != nil {
		o.Found()
	}
	wait := o.Wait
	if err := db.stop(); err != nil {
		db.opts.Log.Warn("closing the table's shard before dropping it", "table", db.opts.Name, "error", err.Error())
	}
	switch {
	case wait < 0:
		wait = 0
	case wait == 0:
		wait = DropWait
	}
	fenced, err := walshard.FenceForDrop(ctx, db.b)
	if err == nil && slices.ContainsFunc(fenced, func(id string) bool { return id != db.opts.Shard.Shard }) {
		err = backoff.Sleep(ctx, wait)
	}
	if err != nil {
		return err
	}
	return deleteTable(ctx, db.b)
}

// deleteTable deletes a table's own objects, manifests first.
func deleteTable(ctx context.Context, b blob.Bucket) error {
	del := func(prefix string) error {
		for o, err := range blob.List(ctx, b, prefix, 0) {
			if err != nil {
				return err
			}
			if err := b.Delete(ctx, o.Key); err != nil && !errors.Is(err, blob.ErrNotFound) {
				return err
			}
		}
		return nil
	}
	if err := del(format.VersionsDir); err != nil {
		return err
	}
	for token := ""; ; {
		page, err := b.ListDir(ctx, "", token, 0)
		if err != nil {
			return err
		}
		for _, o := range page.Objects {
			if err := b.Delete(ctx, o.Key); err != nil && !errors.Is(err, blob.ErrNotFound) {
				return err
			}
		}
		for _, f := range page.Folders {
			if format.Reserved(strings.TrimSuffix(f, "/")) {
				if err := del(f); err != nil {
					return err
				}
			}
		}
		if page.Next == "" {
			return nil
		}
		token = page.Next
	}
}
