package command

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/engine"
)

func newRepair(env *Env) *cobra.Command {
	var drop bool
	var shard string
	c := &cobra.Command{
		Use:   "repair URL",
		Short: "Check that the newest version's data is all there; undo only what was never acknowledged",
		Long: `repair checks every object the newest version references. A commit whose
objects garbage collection deleted before its manifest landed (a writer
stalled past GC and died) was never acknowledged: repair undoes it, as the
next collection would. Any other missing object holds acknowledged rows:
repair names it and the version that added it, and changes nothing. Put the
object back from a backup if you can; only if you cannot, --drop-missing
removes the fragments whose data is gone, with their rows, so that the
table reads again. Exit status 1 while data is missing.

With --shard, repair checks that shard's write-ahead log instead, changing
nothing: every entry above its flushed position must be there and decode,
or the shard will not open (its server answers 500 data_missing), nor be
adopted. With --drop-missing as well, it opens the shard as its owner
would (fencing any owner still running), sets aside each entry that is
missing or damaged — a copy or a note under the shard's quarantine/, its
rows lost — and flushes and merges the rest of the log.`,
		Example: `  strata repair file://./strata-demo/rollouts
  strata repair file://./strata-demo/rollouts --drop-missing
  strata repair file://./strata-demo/rollouts --shard srv-web-1 --drop-missing`,
		Args: ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			db, err := openDB(c.Context(), env, args[0], "repair")
			if err != nil {
				return err
			}
			defer db.Close()
			if shard != "" {
				return repairShard(c, env, db, shard, drop)
			}
			res, err := db.Repair(c.Context(), drop)
			for _, v := range res.Undone {
				fmt.Fprintf(env.Out, "undid v%d: its data was collected before it landed, so it was never acknowledged\n", v)
			}
			if drop && res.Dropped != nil {
				var rows int64
				for _, f := range res.Dropped {
					rows += f.LiveRows()
					fmt.Fprintf(env.Out, "dropped fragment %d (%s, %d rows)\n", f.ID, f.Key, f.LiveRows())
				}
				fmt.Fprintf(env.Out, "dropped %d fragments, %d rows\n", len(res.Dropped), rows)
				return err
			}
			if err != nil {
				return err
			}
			if len(res.Missing) == 0 {
				fmt.Fprintln(env.Out, "every object the newest version references is there")
			}
			return nil
		},
	}
	c.Flags().BoolVar(&drop, "drop-missing", false, "remove fragments whose data is gone for good, or with --shard set aside WAL entries that are (their rows are lost)")
	c.Flags().StringVar(&shard, "shard", "", "check this write-ahead-log shard instead of the table's fragments")
	return c
}

// repairShard checks a shard's WAL and, with drop, sets aside what cannot
// be replayed and merges the rest.
func repairShard(c *cobra.Command, env *Env, db *engine.DB, shard string, drop bool) error {
	damage, err := db.CheckLog(c.Context(), shard)
	if err != nil {
		return err
	}
	if len(damage) == 0 {
		fmt.Fprintf(env.Out, "shard %s: every WAL entry above its flushed position is there and decodes\n", shard)
		return nil
	}
	for _, d := range damage {
		fmt.Fprintln(env.Out, d)
	}
	if !drop {
		return fmt.Errorf("shard %s: %d WAL entries cannot be replayed; put them back from a backup, or give up their rows with --drop-missing", shard, len(damage))
	}
	res, err := db.Adopt(c.Context(), shard, engine.AdoptOptions{SetAsideLost: true, Writer: "repair"})
	for _, q := range res.SetAside {
		fmt.Fprintf(env.Out, "set aside WAL position %d (%s): %s\n", q.Position, q.Key, q.Reason)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "shard %s: replayed %d rows from its other entries, merged %d generations", shard, res.Rows, res.Generations)
	if res.Version != 0 {
		fmt.Fprintf(env.Out, " at v%d", res.Version)
	}
	fmt.Fprintln(env.Out)
	return nil
}
