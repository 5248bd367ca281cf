package command

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

const demoURL = "file://./strata-demo/rollouts"

var workerShard = regexp.MustCompile(`^w(\d+)$`)

func newDemo(env *Env) *cobra.Command {
	var workers, appends, rows int
	c := &cobra.Command{
		Use:   "demo [URL]",
		Short: "See the whole system work: workers writing through shards, merges, compaction",
		Long: `demo creates a rollouts table (or adds to the one there), runs workers as
goroutines that each append through their own WAL shard, merges their
generations into the table, compacts it as the compactor Job would, and
prints what happened. Run it again to add more workers' rows.`,
		Example: `  strata demo
  strata demo file:///tmp/rollouts --workers 8 --appends 50
  strata demo 's3://strata/rollouts?endpoint=http://127.0.0.1:9000'`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError{fmt.Errorf("demo takes at most one URL\n\n%s", c.UsageString())}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			u := demoURL
			if len(args) == 1 {
				u = args[0]
			}
			return runDemo(c, env, u, workers, appends, rows)
		},
	}
	f := c.Flags()
	f.IntVar(&workers, "workers", 4, "worker goroutines, each with its own shard")
	f.IntVar(&appends, "appends", 25, "appends per worker")
	f.IntVar(&rows, "rows", 100, "rows per append")
	cli.Bound(f, "workers", 1, maxWorker+1)
	cli.Bound(f, "rows", 1, rollouts.IDBase)
	AtLeast(c, 1, "appends")
	return c
}

// runDemo runs the demo on the table at u.
func runDemo(c *cobra.Command, env *Env, u string, workers, appends, rows int) error {
	ctx := c.Context()
	b, err := env.Open(ctx, u)
	if err != nil {
		return err
	}
	defer b.Close()
	first, err := demoTable(c, env, u, b)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Err, "demo: %d workers (w%02d…w%02d), each appending %d batches of %d rows through its own shard\n",
		workers, first, first+workers-1, appends, rows)
	start := time.Now()
	stats := make([]engine.ShardStats, workers)
	errs := make([]error, workers)
	bar := newProgress(env.Err, "demo: appends", "rows", int64(workers*appends*rows))
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { stats[i], errs[i] = demoWorker(c, b, first+i, appends, rows, bar) })
	}
	wg.Wait()
	bar.Done()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	wall := time.Since(start)
	written := workers * appends * rows
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "\nwrote %d rows (%.1f MB logical) in %.2fs: %.0f rows/s, every append durable in its shard's WAL\n",
		written, float64(written*rollouts.RowBytes)/1e6, wall.Seconds(), float64(written)/wall.Seconds())
	fmt.Fprintln(env.Out, "\nshards before their final flush and merge:")
	for _, st := range stats {
		fmt.Fprintf(env.Out, "  %s  epoch %d  WAL written %d, flushed %d (lag %d entries)  memtable %d rows  %d generations awaiting merge\n",
			st.Shard, st.Epoch, st.WALLastWritten, st.WALFlushed, st.WALLag, st.MemtableRows, st.PendingGenerations)
	}
	fmt.Fprintf(env.Out, "\ntable: version %d, %d rows, %d fragments, %.1f MB\n",
		s.Version(), s.Manifest().Rows(), len(s.Manifest().Fragments), float64(s.Manifest().Bytes())/1e6)
	if err := demoCompact(c, env, b); err != nil {
		return err
	}
	return demoSample(c, env, b, u)
}

// demoTable creates the rollouts table at u when there is none, and
// returns the first worker number that earlier runs left unused.
func demoTable(c *cobra.Command, env *Env, u string, b blob.Bucket) (int, error) {
	ctx := c.Context()
	m, err := table.ReadLatest(ctx, b)
	if errors.Is(err, format.ErrNotFound) {
		if err := checkNewTable(ctx, env, u, b); err != nil {
			return 0, err
		}
		if m, _, err = engine.Create(ctx, b, rollouts.Schema, "strata", nil); err != nil {
			return 0, err
		}
		fmt.Fprintf(env.Out, "created the rollouts table at %s\n", u)
	} else if err != nil {
		return 0, err
	}
	if err := evolve.CheckSchema(rollouts.Schema, m.Schema()); err != nil {
		return 0, fmt.Errorf("%s holds another table: %w", u, err)
	}
	first := 0 // worker numbers already used by earlier runs
	for id := range m.Shards {
		if g := workerShard.FindStringSubmatch(id); g != nil {
			n, _ := strconv.Atoi(g[1])
			first = max(first, n+1)
		}
	}
	return first, nil
}

// demoCompact compacts the table as the compactor Job would, and records
// the run.
func demoCompact(c *cobra.Command, env *Env, b blob.Bucket) error {
	ctx := c.Context()
	fmt.Fprintln(env.Err, "demo: compacting, as the compactor Job would")
	db, err := engine.Open(ctx, b, &engine.Options{Writer: "strata demo", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer db.Close()
	info, err := db.Compact(ctx, engine.CompactOptions{})
	if err != nil {
		return err
	}
	cres := info.Result
	fmt.Fprintf(env.Out, "compaction: fragments %d -> %d, %d rows, %.2fs (version %d)\n",
		cres.FragmentsBefore, cres.FragmentsAfter, cres.RowsAfter, info.Duration.Seconds(), cres.Version)
	return nil
}

// demoSample prints a few rows of the table and where to look further.
func demoSample(c *cobra.Command, env *Env, b blob.Bucket, u string) error {
	ctx := c.Context()
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		return err
	}
	fmt.Fprintln(env.Out, "\na sample of rows:")
	w, _ := newRowWriter(env.Out, "table", 3)
	if err := w.writeAll(s.Scan(ctx, table.ScanOptions{Columns: []string{"id", "worker", "step", "reward", "prompt", "artifact"}})); err != nil {
		return err
	}
	if err := w.close(); err != nil {
		return err
	}
	strata, compactor := invokedAs(os.Args[0])
	fmt.Fprintf(env.Out, `
look further:
  %[2]s stats %[1]s
  %[2]s scan %[1]s --columns id,worker,reward --filter 'reward >= 0.99' --limit 5
  %[2]s versions %[1]s --detail --limit 5
  %[3]s --once --dry-run --table %[1]s
`, quoteURL(u), strata, compactor)
	return nil
}

// invokedAs is how to run strata and strata-compactor again the way this
// one ran: "go run ./cmd/..." from go run (a binary in Go's build cache),
// else by the name it was run by (an installed binary, or a path to one).
func invokedAs(arg0 string) (strata, compactor string) {
	if strings.Contains(filepath.ToSlash(arg0), "/go-build") {
		return "go run ./cmd/strata", "go run ./cmd/strata-compactor"
	}
	if arg0 == "" || !strings.Contains(filepath.Base(arg0), "strata") {
		return "strata", "strata-compactor" // a test binary
	}
	return arg0, arg0[:strings.LastIndex(arg0, "/")+1] + "strata-compactor"
}

// demoWorker appends through shard w<n>, merging in the background, then
// flushes and merges what is left. It returns the shard's stats before the
// final flush.
func demoWorker(c *cobra.Command, b blob.Bucket, n, appends, rows int, bar *progress) (engine.ShardStats, error) {
	ctx := c.Context()
	db, err := engine.Open(ctx, b, &engine.Options{Writer: fmt.Sprintf("demo worker %d", n), Log: slog.New(slog.DiscardHandler),
		Shard: engine.ShardOptions{Shard: fmt.Sprintf("w%02d", n), FlushRows: int64(5 * rows)}, MergeInterval: 100 * time.Millisecond})
	if err != nil {
		return engine.ShardStats{}, err
	}
	defer db.Close()
	for a := range appends {
		rec := rollouts.Batch(nil, 42, n, int64(a*rows), rows)
		_, err := db.Append(ctx, engine.AppendOptions{}, rec)
		rec.Release()
		if err != nil {
			return engine.ShardStats{}, err
		}
		bar.Add(int64(rows))
	}
	st := db.OpenShard().Stats()
	return st, db.Drain(ctx)
}

// quoteURL quotes a URL for a shell when it has a query.
func quoteURL(u string) string {
	for _, r := range u {
		if r == '?' || r == '&' {
			return "'" + u + "'"
		}
	}
	return u
}
