package commit

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// outwaitLeases returns once no shard can acknowledge rows under the
// schema before a commit at version v took values away from it (a column
// dropped, or retired by a restore): Options.SchemaWait after the commit,
// and at once when the table has no shard. A shard begins a write it will
// acknowledge only under a schema it checked within evolve.SchemaLease, and
// the commit's marker was there before the commit; so a write begun after
// this returns was checked after the commit, and refuses the columns it
// lost. The commit has landed whatever this returns: an error says only
// that the wait was cut short.
func (t *Table) outwaitLeases(ctx context.Context, v uint64, before, after *arrow.Schema) error {
	if !evolve.LosesColumns(before, after) {
		return nil
	}
	p, err := t.b.ListPage(ctx, format.ShardsDir, "", 1)
	if err != nil {
		return fmt.Errorf("commit: v%d is committed; looking for shards that may hold the schema before it: %w", v, err)
	}
	if len(p.Objects) == 0 {
		return nil
	}
	sleep := t.opts.Sleep
	if sleep == nil {
		sleep = timerSleep
	}
	if err := sleep(ctx, t.opts.SchemaWait); err != nil {
		return fmt.Errorf("commit: v%d is committed; waiting %v for shards to learn of its schema was cut short (rows acknowledged meanwhile may lose the columns it took away): %w", v, t.opts.SchemaWait, err)
	}
	return nil
}

// timerSleep waits d, or until ctx ends.
func timerSleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
