package command

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/changes"
	"github.com/stratadb/strata/table/evolve"
)

// followLong is follow's help.
const followLong = `follow prints the changes after --from (or after the named consumer's
position) as strata changes does, then waits for the next version, looking
every --poll (one request each), until it is stopped (or, with
--exit-when-idle, once it has caught up).

In JSON lines, each run of versions ends with a line
{"_change":"through","_version":V}: every change through V was printed.
With --consumer NAME the position is recorded in the table after each such
line, and a follow under that name starts after it: stopped and started
again, it prints each change once, but for a version it had printed and
not yet recorded when it was killed (printed again: a sink keyed by
_version takes it once). Garbage collection keeps the versions a named
consumer has not read for gc's --consumer-retention (7 days); past it,
follow fails naming the oldest version left. strata stats lists the
consumers and their lag.

With --group G --member M it follows as member M of consumer group G:
the members of a group split the units of each new version between them
(each fragment it adds, and its deletes with its first fragment's unit),
each unit to one member, whose lines name it in "_unit"; the marker line
says this member's share through V was printed. A member renews its claim
every half of --lease; one that stops renewing it (killed, stopped) loses
its share to the others after the lease, and one stopped by a signal gives
it back at once. A unit printed and not yet recorded when its member died
is printed again by the member that takes it over: a sink keyed by
_version and _unit takes it once. A group that does not exist yet starts
after --from (the table's creation without it); one that exists goes on
from its positions. docs/format.md has the group's objects.`

func newFollow(env *Env) *cobra.Command {
	var columns, format, consumer, filter, group, member string
	var from uint64
	var poll, lease time.Duration
	var partitions int
	var exitIdle bool
	c := &cobra.Command{
		Use:   "follow URL",
		Short: "Print the rows inserted and deleted as versions land, and wait for more",
		Long:  followLong,
		Example: `  strata follow file://./strata-demo/rollouts --from 0 --columns id,reward
  strata follow file://./strata-demo/rollouts --consumer trainer --exit-when-idle
  strata follow file://./strata-demo/rollouts --group learners --member rank-0`,
		Args: ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if (group == "") != (member == "") {
				return usageError{fmt.Errorf("--group and --member go together")}
			}
			if group != "" && consumer != "" {
				return usageError{fmt.Errorf("--consumer or --group: a member's position is its group's")}
			}
			if !c.Flags().Changed("from") && consumer == "" && group == "" {
				return usageError{fmt.Errorf("follow needs --from VERSION, --consumer NAME or --group NAME --member NAME")}
			}
			if format != "jsonl" && format != "csv" {
				return usageError{fmt.Errorf("--format must be jsonl or csv (follow streams; a table aligns every row first), not %q", format)}
			}
			opts := changes.FollowOptions{Poll: poll, Consumer: consumer}
			cols, err := columnsFlag(columns)
			if err != nil {
				return err
			}
			opts.Columns = cols
			if opts.Filter, err = filterFlag(filter); err != nil {
				return err
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
			ctx := c.Context()
			if exitIdle {
				if opts.Until, err = table.LatestVersion(ctx, b); err != nil {
					return err
				}
			}
			follow := changes.Follow(ctx, b, from, opts)
			if group != "" {
				follow = changes.FollowGroup(ctx, b, group, member, changes.GroupOptions{ChangesOptions: opts.ChangesOptions,
					Poll: poll, Lease: lease, Partitions: partitions, From: from, Until: opts.Until})
			}
			err = printFollow(follow, w, group != "")
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				err = nil // stopped by a signal: not a failure
			}
			if cerr := w.close(); err == nil {
				err = cerr
			}
			return err
		},
	}
	f := c.Flags()
	f.Uint64Var(&from, "from", 0, "the version the changes come after (0: the table's creation; a named consumer's position wins)")
	f.StringVar(&consumer, "consumer", "", "follow as this named consumer: start after its position and record it")
	f.StringVar(&group, "group", "", "follow as a member of this consumer group (with --member): the group's members split the changes")
	f.StringVar(&member, "member", "", "this member's name in --group")
	f.DurationVar(&lease, "lease", 30*time.Second, "with --group: how long the member's claim lasts unrenewed")
	f.IntVar(&partitions, "partitions", table.DefaultGroupPartitions, "with --group: the partitions of a new group's units (a group keeps its own)")
	f.DurationVar(&poll, "poll", time.Second, "how often to look for a new version when there is none")
	f.BoolVar(&exitIdle, "exit-when-idle", false, "exit once every version there was at the start is printed")
	f.StringVar(&columns, "columns", "", "comma-separated columns (default: all)")
	f.StringVar(&filter, "filter", "", "print only the changed rows this filter matches (its columns must be in every version followed)")
	f.StringVar(&format, "format", "jsonl", "jsonl or csv")
	AtLeast(c, 0, "from")
	AtLeast(c, int64(time.Millisecond), "poll")
	AtLeast(c, int64(time.Second), "lease")
	cli.Bound(c.Flags(), "partitions", 1, table.MaxGroupPartitions)
	return c
}

// printFollow prints the changes Follow yields, and a marker after each
// run of versions in JSON lines, until the follow ends.
func printFollow(follow iter.Seq2[changes.Change, error], w *rowWriter, units bool) error {
	for ch, err := range follow {
		if err != nil {
			return err
		}
		if ch.Kind == changes.ChangeThrough {
			if w.format == "jsonl" {
				if _, err := fmt.Fprintf(w.out, "{%q:%q,%q:%d}\n", evolve.ChangeColumn, changes.ChangeThrough, evolve.VersionColumn, ch.Version); err != nil {
					return err
				}
			}
			if err := w.flush(); err != nil {
				return err
			}
			continue
		}
		rec := changes.WithChangeColumns(ch, nil)
		if units {
			withUnit := changes.WithUnitColumn(rec, ch.Unit, nil)
			rec.Release()
			rec = withUnit
		}
		err := w.write(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return nil
}
