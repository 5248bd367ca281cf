package command

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

func newTables(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "tables URL",
		Short: "List the tables under a bucket URL, at any depth, with their newest versions",
		Long: `tables walks the folders under URL: a folder whose _versions/ holds a manifest
is a table, named by its path under URL ("." for URL itself). It costs a LIST
a folder and one more a table, never a listing of what the tables hold: it
does not look into a table's own folders (data/, and those whose names begin
with _ or .), only into its others, where tables may nest ("runs/eval").`,
		Example: `  strata tables file://./strata-demo
  strata tables 's3://lake/tables?endpoint=http://127.0.0.1:9000'`,
		Args: ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			b, err := env.Open(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			tables, err := format.ListTables(c.Context(), b)
			if err != nil {
				return err
			}
			if len(tables) == 0 {
				fmt.Fprintf(env.Err, "no table under %s (a table is a folder holding _versions/)\n", args[0])
			}
			tw := tabwriter.NewWriter(env.Out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TABLE\tVERSION")
			for _, t := range tables {
				name := t.Name
				if name == "" {
					name = "." // the URL names a table itself
				}
				fmt.Fprintf(tw, "%s\t%d\n", name, t.Version)
			}
			return tw.Flush()
		},
	}
}

func newDelete(env *Env) *cobra.Command {
	var filter string
	c := &cobra.Command{
		Use:   "delete URL --filter EXPR",
		Short: "Delete the rows of the table that match a filter, in one commit",
		Long: `delete records the rows matching --filter as deleted (deletion vectors, in
one Delete commit); readers of the new version no longer see them, older
versions still do, and compaction drops them. Rows not yet merged from a
writer's shard are not touched: run a checkpoint first to include them.`,
		Example: `  strata delete file://./strata-demo/rollouts --filter 'reward < 0'
  strata delete file://./strata-demo/rollouts --filter 'worker = 3 AND step >= 100'`,
		Args: ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			if strings.TrimSpace(filter) == "" {
				return usageError{errors.New("delete needs --filter (a filter every row matches deletes every row)")}
			}
			pred, err := filterFlag(filter)
			if err != nil {
				return err
			}
			tb, err := openHandle(c.Context(), env, args[0])
			if err != nil {
				return err
			}
			defer closeDB(tb, &err)
			res, n, err := tb.Delete(c.Context(), pred)
			if err != nil {
				return err
			}
			if n == 0 {
				fmt.Fprintf(env.Out, "no row matched; nothing committed (version %d)\n", res.Version)
				return nil
			}
			fmt.Fprintf(env.Out, "deleted %d rows (version %d)\n", n, res.Version)
			return nil
		},
	}
	c.Flags().StringVar(&filter, "filter", "", "rows to delete, e.g. 'reward < 0 AND worker = 3'")
	return c
}

func newIndex(env *Env) *cobra.Command {
	var list bool
	c := &cobra.Command{
		Use:   "index URL [COLUMN]",
		Short: "Build a key index of an integer, string or binary column (take and upsert read it, through compactions), or --list them",
		Long: `index builds a key index of an integer, string or binary column (such as a
UUID) in one commit: it reads the column of every fragment and writes one
index object. take and upsert then find rows by key through it, and
compactions do not rewrite it (they record where rows moved). A string or
binary column's index is paged by a hash of the key: a lookup reads a few
kilobytes of it, whatever the table's size. Fragments added later are found by a statistics-pruned scan until
the index is built again.`,
		Example: `  strata index file://./strata-demo/rollouts id
  strata index file://./strata-demo/rollouts --list`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) (err error) {
			if list == (len(args) == 2) {
				return usageError{errors.New("index needs a COLUMN, or --list")}
			}
			b, err := env.Open(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			if list {
				m, err := table.ReadLatest(c.Context(), b)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(env.Out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "COLUMN\tROWS\tCOVERS FRAGMENTS BELOW\tOBJECT")
				for _, ix := range m.Indexes {
					fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", ix.Column, ix.Rows, ix.CoveredBelow, ix.Key)
				}
				return tw.Flush()
			}
			tb, err := handle(b)
			if err != nil {
				return err
			}
			defer closeDB(tb, &err)
			res, err := tb.CreateIndex(c.Context(), args[1])
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Out, "indexed %d rows of %s (version %d)\n", res.Manifest.Transaction.Index.Rows, args[1], res.Version)
			return nil
		},
	}
	c.Flags().BoolVar(&list, "list", false, "list the table's key indexes")
	return c
}
