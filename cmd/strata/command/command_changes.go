package command

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/changes"
)

func newChanges(env *Env) *cobra.Command {
	var columns, format, filter string
	var from, to uint64
	var limit int
	c := &cobra.Command{
		Use:   "changes URL --from VERSION",
		Short: "Print the rows inserted and deleted after a version",
		Long: `changes prints the rows that the versions after --from, up to --to (the
latest by default), inserted and deleted, version by version: each row with
two more columns, _change ("insert" or "delete") and _version (the version
that made the change). A delete prints the deleted row's values. A
compaction moves rows and changes none; an overwrite deletes every row and
inserts its own. --from 0 starts at the table's creation.

Reading the changes after the version a consumer last read, then storing
the version it read through, delivers every row once. A version garbage
collection removed is an error naming the oldest one left.`,
		Example: `  strata changes file://./strata-demo/rollouts --from 3
  strata changes file://./strata-demo/rollouts --from 3 --to 5 --columns id,reward --format jsonl
  strata changes file://./strata-demo/rollouts --from 0 --filter 'reward >= 0.9'`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if !c.Flags().Changed("from") {
				return usageError{fmt.Errorf("changes needs --from VERSION (0: from the table's creation)")}
			}
			if c.Flags().Changed("to") && to < max(from, 1) {
				return usageError{fmt.Errorf("--to %d is before --from %d", to, from)}
			}
			opts := changes.ChangesOptions{}
			cols, err := columnsFlag(columns)
			if err != nil {
				return err
			}
			opts.Columns = cols
			if opts.Filter, err = filterFlag(filter); err != nil {
				return err
			}
			w, err := newRowWriter(env.Out, format, limit)
			if err != nil {
				return err
			}
			b, err := env.Open(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			// Every version's rows in the schema of the last one printed,
			// as over HTTP: a filter or a column added since reads older
			// rows as null.
			last := to
			if last == 0 {
				if last, err = table.LatestVersion(c.Context(), b); err != nil {
					return err
				}
			}
			if last >= max(from, 1) {
				m, err := table.ReadManifest(c.Context(), b, last)
				if err != nil {
					return err
				}
				opts.As = m.Schema()
			}
			if err := w.writeAll(changes.ChangeRows(changes.Changes(c.Context(), b, from, to, opts), nil)); err != nil {
				return err
			}
			return w.close()
		},
	}
	f := c.Flags()
	f.Uint64Var(&from, "from", 0, "the version the changes come after (0: the table's creation)")
	f.Uint64Var(&to, "to", 0, "the last version whose changes are printed (default: latest)")
	f.StringVar(&columns, "columns", "", "comma-separated columns (default: all)")
	f.StringVar(&filter, "filter", "", "print only the changed rows this filter matches (a delete by the deleted values)")
	f.StringVar(&format, "format", "table", "table, csv or jsonl")
	f.IntVar(&limit, "limit", 0, "print at most this many rows (0: all)")
	atLeast(c, 0, "limit", "from", "to")
	return c
}
