package command

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/table/evolve"
)

func newAlter(env *Env) *cobra.Command {
	var add, rename, drop, widen []string
	var clusterBy []string
	var noCluster bool
	c := &cobra.Command{
		Use:   "alter URL [--add-column NAME:TYPE] [--rename-column OLD:NEW] [--widen-column NAME:TYPE] [--drop-column NAME] [--cluster-by COL[,COL]]",
		Short: "Change a table's columns or cluster key, by metadata alone, in one commit",
		Long: `alter changes the table's schema in one commit without rewriting a
fragment. Rows written before read under the new schema: an added column
(always nullable) reads null in them, a renamed column keeps its values, a
widened column (int8/int16/int32 to a wider signed integer, float32 to
float64, or "nullable") converts them as they are read, a dropped column is
no longer read (compaction leaves its values out when it rewrites).

Writers that opened the table before keep appending: rows that name a
column by its first name still land in it, and a column dropped meanwhile
is refused by name. Changes apply in the order renames, widenings, drops,
adds, so a column dropped and added again under its name starts empty.
Types: bool, int8…int64, uint8…uint64, float32, float64, string,
large_string, binary, large_binary, date32, timestamp_s/ms/us/ns,
time64_us.

--cluster-by gives the table a cluster key: up to four columns, most
significant first. Compaction then writes fragments sorted by them
(ascending, nulls last) in small row groups, so that a filter on them
reads little more than the rows it matches; fragments written before are
sorted by the next compactions. --no-cluster clears the key. A table has
a cluster key or a key index (strata index), not both.`,
		Example: `  strata alter file://./events --add-column grade:string
  strata alter file://./events --rename-column reward:score --widen-column score:float64
  strata alter file://./events --widen-column step:nullable --drop-column debug
  strata alter file://./events --cluster-by run,step`,
		Args: ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			changes, err := columnChanges(rename, widen, drop, add)
			if err == nil {
				changes, err = withClusterKey(changes, clusterBy, noCluster)
			}
			if err != nil {
				return usageError{err}
			}
			tb, err := openHandle(c.Context(), env, args[0])
			if err != nil {
				return err
			}
			defer closeDB(tb, &err)
			res, err := tb.Alter(c.Context(), changes...)
			if errors.Is(err, evolve.ErrBadSchemaChange) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			if res.Done && noCluster {
				fmt.Fprintf(env.Out, "unchanged: the table has no cluster key (version %d)\n", res.Version)
				return nil
			}
			if res.Done {
				fmt.Fprintf(env.Out, "unchanged: the table is clustered by %s already (version %d)\n", strings.Join(clusterBy, ","), res.Version)
				return nil
			}
			fmt.Fprintf(env.Out, "altered: %s (version %d)\n", strings.Join(res.Manifest.Transaction.Changes, "; "), res.Version)
			return nil
		},
	}
	c.Flags().StringArrayVar(&add, "add-column", nil, "add a nullable column, NAME:TYPE (repeat for more)")
	c.Flags().StringArrayVar(&rename, "rename-column", nil, "rename a column, OLD:NEW")
	c.Flags().StringArrayVar(&drop, "drop-column", nil, "drop a column, NAME")
	c.Flags().StringArrayVar(&widen, "widen-column", nil, "widen a column, NAME:TYPE or NAME:nullable")
	c.Flags().StringArrayVar(&clusterBy, "cluster-by", nil, "set the cluster key, COL[,COL] (compaction sorts by it)")
	c.Flags().BoolVar(&noCluster, "no-cluster", false, "clear the cluster key")
	return c
}

// columnChanges parses alter's flags into changes: renames, widenings,
// drops, then adds.
func columnChanges(rename, widen, drop, add []string) ([]evolve.ColumnChange, error) {
	var out []evolve.ColumnChange
	pair := func(flag, v string) (string, string, error) {
		a, b, ok := strings.Cut(v, ":")
		if !ok || a == "" || b == "" {
			return "", "", fmt.Errorf("--%s takes two parts separated by a colon, got %q", flag, v)
		}
		return a, b, nil
	}
	for _, v := range rename {
		from, to, err := pair("rename-column", v)
		if err != nil {
			return nil, err
		}
		out = append(out, evolve.ColumnChange{Op: evolve.RenameColumn, Column: from, To: to})
	}
	for _, v := range widen {
		name, typ, err := pair("widen-column", v)
		if err != nil {
			return nil, err
		}
		ch := api.SchemaChange{Op: "widen", Column: name, Type: typ}
		if typ == "nullable" {
			ch.Type, ch.Nullable = "", true
		}
		tc, err := tableChange(ch)
		if err != nil {
			return nil, err
		}
		out = append(out, tc)
	}
	for _, v := range drop {
		out = append(out, evolve.ColumnChange{Op: evolve.DropColumn, Column: v})
	}
	for _, v := range add {
		name, typ, err := pair("add-column", v)
		if err != nil {
			return nil, err
		}
		tc, err := tableChange(api.SchemaChange{Op: "add", Column: name, Type: typ})
		if err != nil {
			return nil, err
		}
		out = append(out, tc)
	}
	return out, nil
}

// withClusterKey adds to changes the cluster key --cluster-by (each
// time it is given) or --no-cluster asks for, and refuses an alter of
// nothing.
func withClusterKey(changes []evolve.ColumnChange, given []string, clear bool) ([]evolve.ColumnChange, error) {
	switch {
	case len(given) > 0 && clear:
		return nil, errors.New("give --cluster-by or --no-cluster, not both")
	case len(given) > 1:
		return nil, fmt.Errorf("give --cluster-by once, its columns separated by commas: --cluster-by %s", strings.Join(given, ","))
	case len(given) == 1:
		cols := given[0]
		var key []string
		for _, c := range strings.Split(cols, ",") {
			if c = strings.TrimSpace(c); c == "" {
				return nil, fmt.Errorf("--cluster-by takes column names separated by commas, got %q (--no-cluster clears the key)", cols)
			}
			key = append(key, c)
		}
		changes = append(changes, evolve.ColumnChange{Op: evolve.ClusterBy, Columns: key})
	case clear:
		changes = append(changes, evolve.ColumnChange{Op: evolve.ClusterBy})
	}
	if len(changes) == 0 {
		return nil, errors.New("alter needs a change: --add-column, --rename-column, --widen-column, --drop-column, --cluster-by or --no-cluster")
	}
	return changes, nil
}

// tableChange is the change a SchemaChange describes.
func tableChange(c api.SchemaChange) (evolve.ColumnChange, error) {
	t, err := c.ArrowType()
	if err != nil {
		return evolve.ColumnChange{}, err
	}
	return evolve.ColumnChange{Op: evolve.ChangeOp(c.Op), Column: c.Column, To: c.To, Type: t, Nullable: c.Nullable, Columns: c.Columns}, nil
}
