package command

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table"
)

func newRepair(env *Env) *cobra.Command {
	var drop bool
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
table reads again. Exit status 1 while data is missing.`,
		Example: `  strata repair file://./strata-demo/rollouts
  strata repair file://./strata-demo/rollouts --drop-missing`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			b, err := env.Open(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			res, err := compactor.Repair(c.Context(), b, nil, nil)
			for _, v := range res.Undone {
				fmt.Fprintf(env.Out, "undid v%d: its data was collected before it landed, so it was never acknowledged\n", v)
			}
			if errors.Is(err, table.ErrMissingData) && drop {
				dropped, derr := compactor.DropMissing(c.Context(), b, nil)
				if derr != nil {
					return derr
				}
				var rows int64
				for _, f := range dropped {
					rows += f.LiveRows()
					fmt.Fprintf(env.Out, "dropped fragment %d (%s, %d rows)\n", f.ID, f.Key, f.LiveRows())
				}
				fmt.Fprintf(env.Out, "dropped %d fragments, %d rows\n", len(dropped), rows)
				return nil
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
	c.Flags().BoolVar(&drop, "drop-missing", false, "remove fragments whose data is gone for good (their rows are lost)")
	return c
}
