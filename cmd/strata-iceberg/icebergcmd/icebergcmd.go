// Package icebergcmd is the command line of strata-iceberg, the program
// behind `strata export iceberg`: flags, output and exit codes as the
// strata command's (0 success, 1 failure, 2 usage).
package icebergcmd

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/cmd/strata/command"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/engine/iceberg"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// New builds the command.
func New(env *command.Env) *cobra.Command {
	var o iceberg.Options
	var asOf string
	c := &cobra.Command{
		Use:   "strata-iceberg URL",
		Short: "Write Apache Iceberg metadata for the table's versions, so SQL engines read it",
		Long: `strata-iceberg (or strata export iceberg, which runs it) writes an Apache
Iceberg (format v2) view of the table under _iceberg/ in the table's own
prefix: a snapshot per version that garbage collection keeps (the newest
--keep-versions, those younger than --retain, and tagged ones), over the
table's Parquet fragments in place; deletion vectors become position-delete
files; tags become tag refs. Nothing of the table is copied or changed. Run
again after new commits (or run strata-compactor --iceberg): an export writes
only what changed since the previous one. It prints the metadata location,
which DuckDB's iceberg_scan, Spark and Trino take;
_iceberg/metadata/version-hint.text names the newest.

Garbage collection keeps every version the view describes. Keep --keep-versions
and --retain equal to the collection's (the defaults are the same) so that the
view follows what it keeps.`,
		Example: `  strata export iceberg file://./strata-demo/rollouts
  strata export iceberg 's3://lake/rollouts?endpoint=http://127.0.0.1:9000' --version 42
  duckdb -c "SELECT count(*) FROM iceberg_scan('$(strata export iceberg ./strata-demo/rollouts | head -1)')"`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return command.UsageError(fmt.Errorf("%s takes 1 argument, got %d\n\n%s", c.Name(), len(args), c.UsageString()))
			}
			return nil
		},
		PreRunE: func(c *cobra.Command, args []string) error {
			if err := cli.Prepare(c.Flags(), os.Environ()); err != nil {
				return command.UsageError(err)
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if o.Location == "" {
				loc, err := engine.IcebergLocation(args[0])
				if err != nil {
					return command.UsageError(err)
				}
				o.Location = loc
			}
			at, err := asOfFlag(asOf, o.Version)
			if err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return command.UsageError(err)
			}
			b, err := env.Open(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			if !at.IsZero() {
				m, err := table.VersionAsOf(c.Context(), b, at)
				if err != nil {
					return err
				}
				o.Version = m.Version
			}
			start := time.Now()
			before, _ := blob.StatsOf(b)
			set, finish := command.ProgressBar(env.Err, "export", "versions")
			o.OnProgress = set
			res, err := iceberg.Export(c.Context(), b, &o, time.Now())
			finish()
			if err != nil {
				return err
			}
			after, _ := blob.StatsOf(b)
			fmt.Fprintln(env.Out, res.MetadataLocation)
			what := "unchanged"
			if res.Written {
				what = fmt.Sprintf("added %d snapshots, dropped %d", len(res.Added), len(res.Dropped))
			}
			fmt.Fprintf(env.Err, "version %d is current; %d snapshots (%s); %d requests in %.3f s\n",
				res.Current, len(res.Snapshots), what, after.Sub(before).Requests(), time.Since(start).Seconds())
			return nil
		},
	}
	c.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return command.UsageError(fmt.Errorf("%w\n\n%s", cli.FlagValueError(c.Flags(), err), c.UsageString()))
	})
	c.Flags().Uint64Var(&o.Version, "version", 0, "the newest version described, the current snapshot (default: the latest)")
	c.Flags().StringVar(&asOf, "as-of", "", "the current snapshot is the version committed at or before this time: RFC 3339 or a duration ago (2h)")
	c.Flags().StringVar(&o.Location, "location", "", "the table's address as readers see it (default: from URL, e.g. s3://bucket/prefix, file:///abs/path)")
	c.Flags().IntVar(&o.KeepVersions, "keep-versions", format.DefaultKeepVersions, "newest versions always described (as GC keeps them)")
	c.Flags().DurationVar(&o.RetainFor, "retain", format.DefaultRetention, "versions younger than this are described (as GC keeps them)")
	cli.Bound(c.Flags(), "version", 0, cli.Unlimited)
	cli.Bound(c.Flags(), "retain", 0, cli.Unlimited)
	cli.Bound(c.Flags(), "keep-versions", 1, cli.Unlimited)
	return c
}

// asOfFlag reads --as-of (the zero time when not given), which --version
// excludes.
func asOfFlag(asOf string, version uint64) (time.Time, error) {
	if asOf == "" {
		return time.Time{}, nil
	}
	if version != 0 {
		return time.Time{}, command.UsageError(errors.New("give at most one of --version and --as-of"))
	}
	at, err := table.ParseAsOf(asOf, time.Now())
	if err != nil {
		return time.Time{}, command.UsageError(fmt.Errorf("--as-of: %w", err))
	}
	return at, nil
}
