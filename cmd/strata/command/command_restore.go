package command

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/table"
)

func newRestore(env *Env) *cobra.Command {
	var version uint64
	var tag string
	c := &cobra.Command{
		Use:   "restore URL --version N | --tag T",
		Short: "Commit a new version whose rows are an earlier version's",
		Long: `restore commits a new version whose rows and schema are those of --version
(or of the version --tag names): its fragments are that version's own
objects, so nothing is copied, and every later version stays in the
history. It is an overwrite: a commit that lands before it is replaced by
it; an append, merge, delete or compaction planned before it and landing
after fails with a conflict and is planned again on the restored table.
Rows acknowledged through shards and not yet merged are merged on top of
it. A version garbage collection took cannot be restored.`,
		Example: `  strata restore file://./strata-demo/rollouts --version 3
  strata restore file://./strata-demo/rollouts --tag before-cleanup`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			if (version == 0) == (tag == "") {
				return usageError{errors.New("restore needs one of --version N and --tag T")}
			}
			b, err := env.Open(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			if tag != "" {
				tg, err := table.ReadTag(c.Context(), b, tag)
				if err != nil {
					return err
				}
				version = tg.Version
			}
			tb, err := handle(b)
			if err != nil {
				return err
			}
			defer closeDB(tb, &err)
			res, err := tb.Restore(c.Context(), version)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Out, "restored v%d as version %d (%d rows)\n", version, res.Version, res.Manifest.Rows())
			return nil
		},
	}
	f := c.Flags()
	f.Uint64Var(&version, "version", 0, "the version whose rows to restore")
	f.StringVar(&tag, "tag", "", "the tag naming the version to restore")
	atLeast(c, 0, "version")
	return c
}
