package command

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/changes"
)

func newChanges(env *Env) *cobra.Command {
	var columns, format, filter, fromAsOf, toAsOf string
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
inserts its own. --from 0 starts at the table's creation. --from-as-of and
--to-as-of name the bounds by time: --from-as-of 2h prints the changes of
the last two hours.

Reading the changes after the version a consumer last read, then storing
the version it read through, delivers every row once. A version garbage
collection removed is an error naming the oldest one left.`,
		Example: `  strata changes file://./strata-demo/rollouts --from 3
  strata changes file://./strata-demo/rollouts --from 3 --to 5 --columns id,reward --format jsonl
  strata changes file://./strata-demo/rollouts --from 0 --filter 'reward >= 0.9'
  strata changes file://./strata-demo/rollouts --from-as-of 2h`,
		Args: ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			fromAt, toAt, err := changesTimes(c.Flags(), fromAsOf, toAsOf)
			if err != nil {
				return err
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
			if from, to, err = changesBounds(c.Context(), b, from, to, fromAt, toAt); err != nil {
				return err
			}
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
	f.StringVar(&fromAsOf, "from-as-of", "", "the changes come after the version committed at or before this time (the table's creation when made after it): RFC 3339 or a duration ago (2h)")
	f.StringVar(&toAsOf, "to-as-of", "", "the last version is the newest committed at or before this time: RFC 3339 or a duration ago")
	f.StringVar(&columns, "columns", "", "comma-separated columns (default: all)")
	f.StringVar(&filter, "filter", "", "print only the changed rows this filter matches (a delete by the deleted values)")
	f.StringVar(&format, "format", "table", "table, csv or jsonl")
	f.IntVar(&limit, "limit", 0, "print at most this many rows (0: all)")
	AtLeast(c, 0, "limit", "from", "to")
	return c
}

// changesTimes reads --from-as-of and --to-as-of (zero times when not
// given): one of --from and --from-as-of is needed, at most one of --to
// and --to-as-of.
func changesTimes(fl *pflag.FlagSet, fromAsOf, toAsOf string) (fromAt, toAt time.Time, err error) {
	if fl.Changed("from") == fl.Changed("from-as-of") {
		return fromAt, toAt, usageError{fmt.Errorf("changes needs one of --from VERSION (0: from the table's creation) and --from-as-of TIME")}
	}
	if fl.Changed("to") && fl.Changed("to-as-of") {
		return fromAt, toAt, usageError{fmt.Errorf("give at most one of --to and --to-as-of")}
	}
	for _, bound := range []struct {
		flag, value string
		at          *time.Time
	}{{"from-as-of", fromAsOf, &fromAt}, {"to-as-of", toAsOf, &toAt}} {
		if fl.Changed(bound.flag) {
			t, err := table.ParseAsOf(bound.value, time.Now())
			if err != nil {
				return fromAt, toAt, usageError{fmt.Errorf("--%s: %w", bound.flag, err)}
			}
			*bound.at = t
		}
	}
	return fromAt, toAt, nil
}

// changesBounds turns the bounds given by time into versions: from, the
// version as of fromAt (the table's creation when it was made after it);
// to, the version as of toAt.
func changesBounds(ctx context.Context, b blob.Bucket, from, to uint64, fromAt, toAt time.Time) (uint64, uint64, error) {
	var err error
	if !fromAt.IsZero() {
		if from, err = table.FromAsOf(ctx, b, fromAt); err != nil {
			return 0, 0, err
		}
	}
	if !toAt.IsZero() {
		m, err := table.VersionAsOf(ctx, b, toAt)
		if err != nil {
			return 0, 0, err
		}
		to = m.Version
	}
	if to != 0 && to < max(from, 1) {
		return 0, 0, fmt.Errorf("the last version, %d, is before the changes' first, %d", to, from+1)
	}
	return from, to, nil
}
