package command

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/table/expr"
)

func newUpdate(env *Env) *cobra.Command {
	var filter string
	var set []string
	c := &cobra.Command{
		Use:   "update URL --filter EXPR --set 'COLUMN = VALUE'",
		Short: "Set columns of the rows that match a filter, in one commit",
		Long: `update sets columns of every row matching --filter, in one commit: the
rows are deleted and written again with the new values, so a reader sees
every row before the update or every row after it. --set takes
'column = value' (repeat it, or separate assignments with commas); a value
is a constant written as in a filter (1, 0.5, 'text', true) or null, or
an expression over the row's columns as a filter writes one
(reward * 2, (a + b) / 2, step % 10, -x, another column). Every
expression reads the row as it was before the update; a null operand, a
division by zero or an overflow gives null, which a column that is not
nullable refuses (the update fails and nothing changes).

Rows inserted while it runs (appended, or upserted under a new key) are
not updated, as a delete does not delete them; a delete, compaction, upsert or update of the same fragments makes it
plan again. Rows not yet merged from a writer's shard are not touched: run
a checkpoint first.`,
		Example: `  strata update file://./events --filter 'id = 5' --set 'reward = 1.0'
  strata update file://./events --filter "worker = 'w03' AND step < 10" --set "reward = null, note = 'rerun'"
  strata update file://./events --filter 'step >= 100' --set 'reward = reward * 0.5, step = step - 100'`,
		Args: ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			if strings.TrimSpace(filter) == "" {
				return usageError{errors.New("update needs --filter (a filter every row matches updates every row)")}
			}
			if len(set) == 0 {
				return usageError{errors.New("update needs --set 'column = value'")}
			}
			pred, err := filterFlag(filter)
			if err != nil {
				return err
			}
			assigns, err := expr.ParseAssignments(strings.Join(set, ", "))
			if err != nil {
				return usageError{err}
			}
			tb, err := openHandle(c.Context(), env, args[0])
			if err != nil {
				return err
			}
			defer closeDB(tb, &err)
			res, err := tb.Update(c.Context(), pred, assigns)
			switch {
			case errors.Is(err, expr.ErrBadAssignment) || errors.Is(err, expr.ErrBadPredicate):
				return usageError{err}
			case err != nil:
				return err
			case res.Done:
				fmt.Fprintf(env.Out, "no row matched; nothing committed (version %d)\n", res.Version)
			default:
				fmt.Fprintf(env.Out, "updated %d rows (version %d)\n", res.Updated, res.Version)
			}
			return nil
		},
	}
	c.Flags().StringVar(&filter, "filter", "", "rows to update, e.g. 'id = 5'")
	c.Flags().StringArrayVar(&set, "set", nil, "an assignment, 'column = value' (repeat, or separate with commas)")
	return c
}
