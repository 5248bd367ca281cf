package command

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/table"
)

func newScan(env *Env) *cobra.Command {
	var columns, filter, format string
	var at readPoint
	var limit int
	var fresh bool
	var srv remote
	c := &cobra.Command{
		Use:   "scan URL | scan TABLE --server URL",
		Short: "Print a table's rows",
		Long: `scan prints the rows of a version of the table (the latest by default;
--version N, --tag T, or --as-of TIME for the newest version committed at
or before TIME),
with a projection and a filter pushed down to the fragments' statistics.
A filter is a SQL WHERE clause: comparisons (=, !=, <>, <, <=, >, >=),
[NOT] IN (…), IS [NOT] NULL, [NOT] LIKE 'pat%', [NOT] BETWEEN a AND b,
combined with NOT, AND, OR and parentheses (README.md has the grammar).
With --fresh it adds every row acknowledged through any shard and not yet
merged (each shard's generations and WAL entries), each once.

With --server, scan reads the table TABLE of a strata serve (https:// with
--ca for a certificate signed by a CA of your own).`,
		Example: `  strata scan file://./strata-demo/rollouts --limit 10
  strata scan file://./strata-demo/rollouts --columns id,worker,reward --filter 'reward >= 0.99'
  strata scan file://./strata-demo/rollouts --filter "reward IS NULL OR (step > 90 AND worker NOT IN ('w01', 'w02'))"
  strata scan file://./strata-demo/rollouts --version 3 --format jsonl
  strata scan file://./strata-demo/rollouts --as-of 2h --limit 10
  strata scan file://./strata-demo/rollouts --fresh --limit 10
  strata scan rollouts --server https://strata:8443 --ca ca.pem --limit 10`,
		Args: ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			opts := table.ScanOptions{}
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
			if srv.remote(args[0]) {
				return scanRemote(c.Context(), &srv, args[0], opts, filter, &at, fresh, w)
			}
			b, err := env.Open(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			if fresh {
				if at.set() {
					return usageError{fmt.Errorf("--fresh reads the latest version: not with --version, --tag or --as-of")}
				}
				db, err := handle(b)
				if err != nil {
					return err
				}
				defer closeDB(db, &err)
				if err := w.writeAll(db.ScanFresh(c.Context(), opts)); err != nil {
					return err
				}
				return w.close()
			}
			s, err := at.open(c.Context(), b)
			if err != nil {
				return err
			}
			w.names = columnsOf(s.Manifest().Schema(), opts.Columns) // a header even for no rows
			if err := w.writeAll(s.Scan(c.Context(), opts)); err != nil {
				return err
			}
			return w.close()
		},
	}
	f := c.Flags()
	f.StringVar(&columns, "columns", "", "comma-separated columns (default: all)")
	f.StringVar(&filter, "filter", "", "rows to keep, e.g. \"reward >= 0.9 AND worker = 'w01'\"")
	at.flags(f, "read")
	f.StringVar(&format, "format", "table", "table, csv or jsonl")
	f.IntVar(&limit, "limit", 0, "print at most this many rows (0: all)")
	f.BoolVar(&fresh, "fresh", false, "add the rows acknowledged through shards and not yet merged")
	srv.flags(f)
	AtLeast(c, 0, "version", "limit")
	return c
}
