package command

import (
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/spf13/cobra"

	"github.com/stratadb/strata/table/value"
)

func newTake(env *Env) *cobra.Command {
	var column, columns, format string
	var at readPoint
	c := &cobra.Command{
		Use:   "take URL KEY...",
		Short: "Print the rows with these keys, through the key index when there is one",
		Example: `  strata take file://./strata-demo/rollouts 3000000001 3000000002
  strata take file://./strata-demo/rollouts 7 --column step --columns id,prompt
  strata take file://./runs/rollouts 0b9e2c61-5d0a-4f43-9a57-2c0e7d1f4b88 --column run_id
  strata take file://./t --column delta -- -7      # a negative key after --`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageError{fmt.Errorf("take needs a URL and at least one key\n\n%s", c.UsageString())}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
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
			keys, err := takeKeys(s.Manifest().Schema(), column, args[1:])
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
	c.Flags().StringVar(&column, "column", "id", "the key column: integers, strings, binaries (as text) or booleans")
	c.Flags().StringVar(&columns, "columns", "", "comma-separated columns to print (default: all)")
	c.Flags().StringVar(&format, "format", "table", "table, csv or jsonl")
	at.flags(c.Flags(), "read")
	AtLeast(c, 0, "version")
	return c
}

// takeKeys reads the keys given as arguments as values of the key column
// col of schema: integers for an integer column (timestamps and dates as
// their integers), the text itself for a string or a binary one, true or
// false for a boolean one.
func takeKeys(schema *arrow.Schema, col string, args []string) ([]value.Value, error) {
	fi := schema.FieldIndices(col)
	if len(fi) != 1 {
		return nil, usageError{fmt.Errorf("the table has no column %q to take by", col)}
	}
	typ := schema.Field(fi[0]).Type
	keys := make([]value.Value, len(args))
	for i, a := range args {
		var err error
		switch value.KindOf(typ) {
		case value.KindInt:
			var k int64
			k, err = strconv.ParseInt(a, 10, 64)
			keys[i] = value.Int(k)
		case value.KindUint:
			var k uint64
			k, err = strconv.ParseUint(a, 10, 64)
			keys[i] = value.Uint(k)
		case value.KindString, value.KindBytes:
			keys[i] = value.String(a)
		case value.KindBool:
			var k bool
			k, err = strconv.ParseBool(a)
			keys[i] = value.Bool(k)
		default:
			return nil, usageError{fmt.Errorf("column %q holds %s: not a key column (integers, strings, binaries or booleans)", col, typ)}
		}
		if err != nil {
			return nil, usageError{fmt.Errorf("key %q is not a value of column %q (%s)", a, col, typ)}
		}
	}
	return keys, nil
}
