package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/policyflag"
	"github.com/stratadb/strata/table"
)

func newCompact(env *Env) *cobra.Command {
	var flags *policyflag.Flags
	var dryRun bool
	c := &cobra.Command{
		Use:   "compact URL",
		Short: "Fold small fragments together now, and record the run",
		Long: `compact runs one compaction, whatever the policy's minimum: it bins adjacent
small fragments, rewrites each bin into one fragment, and commits one
Rewrite. It takes the table's lease, as the compactor Job does, and exits 1
naming the holder when another compactor holds it. For scheduled compaction
use strata-compactor.`,
		Example: `  strata compact file://./strata-demo/rollouts --dry-run
  strata compact file://./strata-demo/rollouts --target-rows 500000`,
		Args: ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			db, err := openDB(c.Context(), env, args[0], "strata compact")
			if err != nil {
				return err
			}
			defer db.Close()
			p, err := flags.Policy()
			if err != nil {
				return usageError{err}
			}
			host, _ := os.Hostname()
			set, finish := ProgressBar(env.Err, "compact", "bytes")
			info, err := db.Compact(c.Context(), engine.CompactOptions{Policy: &p, DryRun: dryRun, Holder: "strata compact on " + host,
				Tune: engine.CompactTune{OnProgress: set}})
			finish()
			if errors.Is(err, engine.ErrLeaseHeld) {
				// Another compactor is at work: nothing ran, nothing recorded.
				return err
			}
			res := info.Result
			fmt.Fprint(env.Out, res.Plan.String())
			switch {
			case err != nil:
				return err
			case dryRun:
			case info.Skipped != "":
				fmt.Fprintf(env.Out, "%s: fragments %d (version unchanged)\n", info.Skipped, res.FragmentsBefore)
			default:
				fmt.Fprintf(env.Out, "fragments %d -> %d, %d rows, %d bytes rewritten, %.2fs (version %d)\n",
					res.FragmentsBefore, res.FragmentsAfter, res.RowsAfter, res.BytesRewritten, info.Duration.Seconds(), res.Version)
			}
			return nil
		},
	}
	f := c.Flags()
	f.BoolVar(&dryRun, "dry-run", false, "print the plan; change nothing")
	flags = policyflag.Define(f, false)
	return c
}

func newGC(env *Env) *cobra.Command {
	var p engine.GCPolicy
	c := &cobra.Command{
		Use:   "gc URL",
		Short: "Delete old versions and the objects only they use",
		Long: `gc keeps the newest --keep-versions versions, those younger than --retain, and
every tagged version; it deletes the other manifests (after writing the GC
boundary) and the objects no kept version references that are older than
--safety-age. The versions a named consumer (strata follow --consumer) has
not read are kept while younger than --consumer-retention. A shard that
holds nothing outside the table and has written nothing for
--retire-shards-after (a worker gone for good) is retired: its objects go;
the table keeps its record, so the shard opens again under its name.`,
		Example: `  strata gc file://./strata-demo/rollouts --dry-run
  strata gc file://./strata-demo/rollouts --keep-versions 3 --retain 10m`,
		Args: ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			db, err := openDB(c.Context(), env, args[0], "strata gc")
			if err != nil {
				return err
			}
			defer db.Close()
			if p.RetireShardsAfter == 0 {
				p.RetireShardsAfter = -1 // 0 on the command line: never
			}
			res, err := db.GC(c.Context(), engine.GCOptions{Policy: &p})
			for _, v := range res.Repaired {
				fmt.Fprintf(env.Out, "undid v%d: its data was collected before it landed, so it was never acknowledged\n", v)
			}
			if err != nil {
				return err
			}
			if p.DryRun {
				fmt.Fprintf(env.Out, "would delete (nothing deleted):\n%s", res.Plan)
				return nil
			}
			fmt.Fprintf(env.Out, "boundary v%d; kept %d versions; deleted %d versions and %d objects (%d bytes)\n",
				res.Boundary, res.VersionsKept, len(res.VersionsDeleted), len(res.ObjectsDeleted), res.BytesFreed)
			if len(res.ShardsRetired) > 0 {
				fmt.Fprintf(env.Out, "retired %d shards: %s\n", len(res.ShardsRetired), strings.Join(res.ShardsRetired, ", "))
			}
			if len(res.GhostsDeleted) > 0 {
				fmt.Fprintf(env.Out, "deleted %d ghost versions (collected versions a stalled writer created again): %v\n", len(res.GhostsDeleted), res.GhostsDeleted)
			}
			return nil
		},
	}
	f := c.Flags()
	f.BoolVar(&p.DryRun, "dry-run", false, "list what would go; delete nothing")
	f.IntVar(&p.KeepVersions, "keep-versions", 10, "newest versions always kept")
	f.DurationVar(&p.RetainFor, "retain", time.Hour, "versions younger than this are kept (at least 5m)")
	f.DurationVar(&p.SafetyAge, "safety-age", time.Hour, "unreferenced objects younger than this are kept (at least 5m)")
	f.DurationVar(&p.ConsumerRetention, "consumer-retention", table.DefaultConsumerRetention, "versions a named consumer has not read are kept while younger than this (at least 5m)")
	f.DurationVar(&p.RetireShardsAfter, "retire-shards-after", engine.DefaultRetireShardsAfter, "delete the objects of a shard that holds nothing outside the table and has written nothing this long (at least 12h; 0: never)")
	AtLeast(c, 1, "keep-versions")
	// A duration the collector reads 0 of as its default, or raises to
	// its floor, is refused below the floor: 0 never means "the default".
	AtLeast(c, int64(engine.MinRetain), "retain", "safety-age", "consumer-retention")
	AtLeast(c, 0, "retire-shards-after")
	return c
}

// openDB opens the table at u as an engine handle that closes its bucket,
// writing as writer; its events log nothing (the verb prints what it did).
func openDB(ctx context.Context, env *Env, u, writer string) (*engine.DB, error) {
	b, err := env.Open(ctx, u)
	if err != nil {
		return nil, err
	}
	db, err := engine.Open(ctx, b, &engine.Options{Name: u, Writer: writer, CloseBucket: true, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Close()
		return nil, err
	}
	return db, nil
}
