package command

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

func newTake(env *Env) *cobra.Command {
	var column, columns, format string
	var at readPoint
	c := &cobra.Command{
		Use:   "take URL KEY...",
		Short: "Print the rows with these keys, through the key index when there is one",
		Example: `  strata take file://./strata-demo/rollouts 3000000001 3000000002
  strata take file://./strata-demo/rollouts 7 --column step --columns id,prompt`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageError{fmt.Errorf("take needs a URL and at least one key\n\n%s", c.UsageString())}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			var keys []int64
			for _, a := range args[1:] {
				k, err := strconv.ParseInt(a, 10, 64)
				if err != nil {
					return usageError{fmt.Errorf("key %q is not an integer", a)}
				}
				keys = append(keys, k)
			}
			w, err := newRowWriter(env.Out, format, 0)
			if err != nil {
				return err
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
			cols, err := columnsFlag(columns)
			if err != nil {
				return err
			}
			recs, res, err := s.Take(c.Context(), column, keys, cols)
			if err != nil {
				return err
			}
			for _, rec := range recs {
				err = w.write(rec)
				rec.Release()
				if err != nil {
					return err
				}
			}
			if err := w.close(); err != nil {
				return err
			}
			fmt.Fprintf(env.Err, "%d rows; %d keys through the index, %d fragments scanned\n", w.rows, res.FromIndex, res.ScannedFrags)
			return nil
		},
	}
	c.Flags().StringVar(&column, "column", "id", "the key column (an integer column)")
	c.Flags().StringVar(&columns, "columns", "", "comma-separated columns to print (default: all)")
	c.Flags().StringVar(&format, "format", "table", "table, csv or jsonl")
	at.flags(c.Flags(), "read")
	AtLeast(c, 0, "version")
	return c
}
