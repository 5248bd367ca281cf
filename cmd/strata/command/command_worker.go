package command

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/spf13/cobra"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

func newWorker(env *Env) *cobra.Command {
	var n, rows, appends int
	var every time.Duration
	var flushEvery, mergeEvery, drainTimeout time.Duration
	var reuseBytes int64
	var fleet bool
	c := &cobra.Command{
		Use:   "worker URL",
		Short: "A rollouts worker: append generated rows through its own shard, printing what is acknowledged",
		Long: `worker is the process a fleet runs: it writes generated rollout rows (the
benchmark workload's generator) through shard wNN of the table, creating the
table if there is none, flushing and merging in the background. After each
acknowledged append it prints the append's first id and row count on stdout
("ack FIRST COUNT"), so that a test harness can check every acknowledged row.
A restarted worker with the same --worker fences its old self and goes on
after the largest id it finds of its own (in the table, its generations and
its replayed WAL).`,
		Example: `  strata worker file://./strata-demo/rollouts --worker 7 --appends 100
  strata worker 's3://strata/rollouts?endpoint=http://minio:9000' --worker 1 --every 200ms`,
		Args: ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			b, err := env.Open(ctx, args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			if _, err := table.LatestVersion(ctx, b); errors.Is(err, format.ErrNotFound) {
				if err := checkNewTable(ctx, env, args[0], b); err != nil {
					return err
				}
				if _, _, err := engine.Create(ctx, b, rollouts.Schema, "strata", nil); err != nil && !errors.Is(err, format.ErrExists) {
					return err
				}
			} else if err != nil {
				return err
			}
			db, err := engine.Open(ctx, b, &engine.Options{Name: args[0], Writer: fmt.Sprintf("worker %d", n),
				Shard:         engine.ShardOptions{Shard: fmt.Sprintf("w%02d", n), FlushInterval: flushEvery, ReuseBytes: ReuseBytes(reuseBytes)},
				MergeInterval: mergeEvery, FleetMerge: fleet, Log: slog.New(slog.NewTextHandler(env.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			if err != nil {
				return err
			}
			defer db.Close()
			s, err := db.Shard(ctx)
			if err != nil {
				return err
			}
			// Continue after the rows this worker already wrote: ids are
			// worker*1e9 + seq, and the table and the shard know the rest.
			seq, err := nextSeq(c, s, n)
			if err != nil {
				return err
			}
			out := bufio.NewWriter(env.Out)
			defer out.Flush()
			// From a SIGTERM on, the append in flight and the drain have
			// drainTimeout between them: a flush waiting for room (no
			// merge running) would otherwise hold the worker for minutes.
			bounded, cancel := afterSignal(ctx, drainTimeout)
			defer cancel()
			l := workerLoop{db: db, out: out, n: n, rows: rows, appends: appends, every: every}
			if err := l.run(ctx, bounded, seq); err != nil {
				return err
			}
			// Leaving normally (done, or SIGTERM): flush and merge, so the
			// rows are in the table and not only in the WAL. After a
			// SIGTERM, only within the bound: what is left stays in the
			// WAL, durable, for the compactor Job to adopt.
			if err := drainWithin(bounded, db); err != nil {
				if ctx.Err() != nil && bounded.Err() != nil {
					fmt.Fprintf(env.Err, "worker %d: drain not done within --drain-timeout %s; the acknowledged rows left are in shard w%02d's WAL, for the compactor Job to adopt\n", n, drainTimeout, n)
					return nil
				}
				return workerErr(err)
			}
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&n, "worker", 0, "worker number: its shard is wNN and its ids worker*1e9+seq")
	f.IntVar(&rows, "rows", 100, "rows per append")
	f.IntVar(&appends, "appends", 0, "appends to make (0: until stopped)")
	f.DurationVar(&every, "every", 0, "pause between appends")
	f.DurationVar(&flushEvery, "flush-interval", time.Second, "flush a memtable this old")
	f.DurationVar(&mergeEvery, "merge-interval", 2*time.Second, "merge generations this often (0: leave it to the compactor Job's fleet merge)")
	f.Int64Var(&reuseBytes, "reuse-bytes", engine.DefaultReuseBytes, ReuseBytesHelp)
	f.DurationVar(&drainTimeout, "drain-timeout", 10*time.Second, "on SIGTERM, how long the append in flight, flushing and merging may take; the rest stays in the WAL for the compactor Job")
	f.BoolVar(&fleet, "fleet-merge", false, "each merge takes every shard's flushed generations, not only this worker's")
	cli.Bound(f, "worker", 0, maxWorker)
	// A worker's ids span IDBase: one append cannot hold more rows.
	cli.Bound(f, "rows", 1, rollouts.IDBase)
	AtLeast(c, 0, "appends", "every", "flush-interval", "merge-interval", "reuse-bytes")
	AtLeast(c, int64(time.Millisecond), "drain-timeout")
	return c
}

// workerLoop is the worker's appends, each reported once acknowledged.
type workerLoop struct {
	db               *engine.DB
	out              *bufio.Writer
	n, rows, appends int
	every            time.Duration
}

// run appends until done or ctx ends (a SIGTERM); the append in flight
// then has until bounded ends.
func (l *workerLoop) run(ctx, bounded context.Context, seq int64) error {
	for a := 0; l.appends <= 0 || a < l.appends; a++ {
		if ctx.Err() != nil {
			break
		}
		rec := rollouts.Batch(nil, 42, l.n, seq, l.rows)
		// A SIGTERM lets the append in flight finish and be
		// reported, within the drain's bound.
		_, err := l.db.Append(bounded, engine.AppendOptions{}, rec)
		rec.Release()
		if err != nil {
			if ctx.Err() != nil {
				break // not acknowledged; what it wrote, if anything, is the WAL's
			}
			return workerErr(err)
		}
		fmt.Fprintf(l.out, "ack %d %d\n", int64(l.n)*rollouts.IDBase+seq, l.rows)
		l.out.Flush()
		seq += int64(l.rows)
		if l.every > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(l.every):
			}
		}
	}
	return nil
}

// afterSignal is a context that ends bound after ctx does (a SIGTERM), and
// not before: the work in flight when the signal comes gets bound to end.
func afterSignal(ctx context.Context, bound time.Duration) (context.Context, context.CancelFunc) {
	bounded, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-ctx.Done():
		case <-bounded.Done():
			return
		}
		select {
		case <-time.After(bound):
			cancel()
		case <-bounded.Done():
		}
	}()
	return bounded, cancel
}

// drainWithin drains db until ctx ends. A flush waiting for room holds
// the shard's flush lock without looking at ctx: the drain is left to
// the Close that follows, which ends that wait.
func drainWithin(ctx context.Context, db *engine.DB) error {
	done := make(chan error, 1)
	go func() { done <- db.Drain(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// workerErr says plainly that the table was dropped under the worker, and
// that it acknowledges nothing more.
func workerErr(err error) error {
	if errors.Is(err, engine.ErrDropped) {
		return fmt.Errorf("the table was dropped: this worker acknowledges no more appends: %w", err)
	}
	return err
}

// ReuseBytesHelp describes --reuse-bytes (engine.ShardOptions.ReuseBytes) of
// the commands that write through a shard.
const ReuseBytesHelp = "WAL entries of at least this many bytes join the table as they are when flushed, so that their rows cross to the store once (0: off, WAL entries in the form builds before it read: while any process that reads the table's shards runs one)"

// ReuseBytes is a --reuse-bytes value as engine.ShardOptions takes it: 0 on
// the command line means off.
func ReuseBytes(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

// nextSeq finds the worker's next sequence number: one past the largest id
// of this worker in the table, its shard's generations and its memtable.
func nextSeq(c *cobra.Command, s *engine.ShardHandle, n int) (int64, error) {
	lo, hi := int64(n)*rollouts.IDBase, int64(n+1)*rollouts.IDBase
	next := int64(0)
	filter := expr.And(expr.Ge("id", value.Int(lo)), expr.Lt("id", value.Int(hi)))
	for rec, err := range s.ScanFresh(c.Context(), table.ScanOptions{Columns: []string{"id"}, Filter: filter}) {
		if err != nil {
			return 0, err
		}
		for _, id := range rec.Column(0).(*array.Int64).Int64Values() {
			next = max(next, id-lo+1)
		}
	}
	return next, nil
}
