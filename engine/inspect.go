package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
)

// ShardStats is every shard of the fleet as of version m (the latest when
// nil), sorted by id: its WAL, generations and memtable, and how much of
// it m holds. The process's own shard is opened when it wrote to the table
// before (a restart), so that the rows its WAL acknowledged show in its
// memtable. Shards found gone while they are read are left out.
func (db *DB) ShardStats(ctx context.Context, m *format.Manifest) ([]ShardStats, error) {
	if m == nil {
		var err error
		if m, err = table.ReadLatest(ctx, db.b); err != nil {
			return nil, err
		}
	}
	ids, err := walshard.Shards(ctx, db.b, m)
	if err != nil {
		return nil, err
	}
	own, err := db.OwnShard(ctx)
	if err != nil {
		return nil, err
	}
	if own != nil && !slices.Contains(ids, own.ID()) {
		ids = append(ids, own.ID())
	}
	stats := make([]*ShardStats, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i, id := range ids {
		g.Go(func() error {
			var st ShardStats
			if own != nil && id == own.ID() {
				st = own.StatsAt(m)
			} else if st, err = walshard.InspectAt(gctx, db.b, id, m); errors.Is(err, walshard.ErrUnknownShard) {
				return nil
			} else if err != nil {
				return err
			}
			stats[i] = &st
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make([]ShardStats, 0, len(stats))
	for _, st := range stats {
		if st != nil {
			out = append(out, *st)
		}
	}
	slices.SortFunc(out, func(a, b ShardStats) int { return strings.Compare(a.Shard, b.Shard) })
	return out, nil
}

// CheckLog reads shard's WAL above its flushed position and lists each
// entry that is missing or damaged (walshard.CheckLog).
func (db *DB) CheckLog(ctx context.Context, shard string) ([]error, error) {
	return walshard.CheckLog(ctx, db.b, shard)
}

// History reads the table's record of runs (compaction, GC, adoption,
// merge, export): each kind's newest, and the newest limit runs.
func (db *DB) History(ctx context.Context, limit int) (Status, error) {
	return compactor.ReadStatus(ctx, db.b, limit)
}

// Lease is the table's compaction lease as of now, when one is held.
func (db *DB) Lease(ctx context.Context, now time.Time) (Lease, bool, error) {
	return compactor.CurrentLease(ctx, db.b, now)
}

// Outlook is what a compaction would do now: the version read, whether the
// policy says it is due and why (or why not), and the plan a run would
// follow.
type Outlook struct {
	Manifest *format.Manifest
	Due      bool
	Why      string
	Plan     CompactionPlan
}

// PlanCompaction reads the latest version and plans a compaction of it by
// p (nil: the DB's Policy), writing nothing: a dry run, and the question
// a driver asks before it starts one.
func (db *DB) PlanCompaction(ctx context.Context, p *Policy) (Outlook, error) {
	pol := db.opts.Policy
	if p != nil {
		pol = *p
	}
	m, err := table.ReadLatest(ctx, db.b)
	if err != nil {
		return Outlook{}, err
	}
	o := Outlook{Manifest: m}
	o.Due, o.Why = compactor.ShouldCompact(m, pol, db.opts.Now())
	o.Plan = compactor.PlanCompaction(m, *pol.EnsureDefaults())
	return o, nil
}
