package command

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/table"
)

func newCount(env *Env) *cobra.Command {
	var filter string
	var at readPoint
	var fresh bool
	c := &cobra.Command{
		Use:   "count URL",
		Short: "Print how many rows a table holds, or match a filter",
		Long: `count prints the number of rows of a version of the table (the latest by
default) that match --filter (every row without one), and nothing else.
It is answered from the fragments' statistics wherever they decide a
fragment (none of its rows can match, or all do); only the others are
read, and only the filter's columns. With --fresh it counts every row
acknowledged through any shard and not yet merged too, as scan --fresh
reads them.`,
		Example: `  strata count file://./strata-demo/rollouts
  strata count file://./strata-demo/rollouts --filter 'reward >= 0.99'
  strata count file://./strata-demo/rollouts --version 3`,
		Args: ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			pred, err := filterFlag(filter)
			if err != nil {
				return err
			}
			if fresh && at.set() {
				return usageError{fmt.Errorf("--fresh reads the latest version: not with --version, --tag or --as-of")}
			}
			b, err := env.Open(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			s, err := at.open(c.Context(), b)
			if err != nil {
				return err
			}
			one := table.ScanOptions{Columns: []string{s.Manifest().Schema().Field(0).Name}, Filter: pred}
			if _, err := s.ScanSchema(one); err != nil {
				return usageError{fmt.Errorf("--filter: %w", err)}
			}
			if !fresh {
				res, err := s.Count(c.Context(), pred)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(env.Out, res.Rows)
				return err
			}
			db, err := handle(b)
			if err != nil {
				return err
			}
			defer closeDB(db, &err)
			var n int64
			for rec, err := range db.ScanFresh(c.Context(), one) {
				if err != nil {
					return err
				}
				n += rec.NumRows()
			}
			_, err = fmt.Fprintln(env.Out, n)
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&filter, "filter", "", "rows to count, e.g. \"reward >= 0.9 AND worker = 'w01'\"")
	at.flags(f, "count")
	f.BoolVar(&fresh, "fresh", false, "count the rows acknowledged through shards and not yet merged too")
	AtLeast(c, 0, "version")
	return c
}
