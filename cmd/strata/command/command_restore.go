package command

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

func newRestore(env *Env) *cobra.Command {
	var at readPoint
	c := &cobra.Command{
		Use:   "restore URL --version N | --tag T | --as-of TIME",
		Short: "Commit a new version whose rows are an earlier version's",
		Long: `restore commits a new version whose rows and schema are those of --version
(or of the version --tag names, or of the newest version committed at or
before --as-of): its fragments are that version's own
objects, so nothing is copied, and every later version stays in the
history. It is an overwrite: a commit that lands before it is replaced by
it; an append, merge, delete or compaction planned before it and landing
after fails with a conflict and is planned again on the restored table.
Rows acknowledged through shards and not yet merged are merged on top of
it. A version garbage collection took cannot be restored.`,
		Example: `  strata restore file://./strata-demo/rollouts --version 3
  strata restore file://./strata-demo/rollouts --tag before-cleanup
  strata restore file://./strata-demo/rollouts --as-of 2026-12-07T09:00:00Z`,
		Args: ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			if !at.set() {
				return usageError{errors.New("restore needs one of --version N, --tag T and --as-of TIME")}
			}
			b, err := env.Open(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			version := at.version
			if at.tag != "" || at.asOf != "" {
				s, err := at.open(c.Context(), b)
				if err != nil {
					return err
				}
				version = s.Version()
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
	at.flags(f, "restore")
	f.Lookup("version").Usage = "the version whose rows to restore"
	AtLeast(c, 0, "version")
	return c
}
