package command

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/table"
)

func newVersions(env *Env) *cobra.Command {
	var limit int
	var detail bool
	c := &cobra.Command{
		Use:   "versions URL",
		Short: "List a table's versions, newest first",
		Long: `versions lists versions from one listing of _versions/; with --detail it
also reads each manifest for its operation and row count (one GET each).`,
		Example: `  strata versions file://./strata-demo/rollouts --limit 5 --detail`,
		Args:    ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			b, err := env.Open(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			vs, err := table.Versions(c.Context(), b, limit, detail)
			if err != nil {
				return err
			}
			tags, err := table.Tags(c.Context(), b)
			if err != nil {
				return err
			}
			tagOf := map[uint64]string{}
			for _, t := range tags {
				tagOf[t.Version] += t.Name + " "
			}
			tw := tabwriter.NewWriter(env.Out, 0, 0, 2, ' ', 0)
			// What a version did and its rows are in its manifest: read
			// (a GET each) and shown with --detail only.
			if detail {
				fmt.Fprintln(tw, "VERSION\tTIME\tOPERATION\tROWS\tTAGS")
			} else {
				fmt.Fprintln(tw, "VERSION\tTIME\tTAGS")
			}
			for _, v := range vs {
				when := v.Time.UTC().Format(time.RFC3339)
				if detail {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", v.Version, when, v.Kind, v.Rows, tagOf[v.Version])
				} else {
					fmt.Fprintf(tw, "%d\t%s\t%s\n", v.Version, when, tagOf[v.Version])
				}
			}
			return tw.Flush()
		},
	}
	c.Flags().IntVar(&limit, "limit", 20, "newest versions to list (0: all)")
	c.Flags().BoolVar(&detail, "detail", false, "read each manifest for its operation and rows")
	AtLeast(c, 0, "limit")
	return c
}

func newTag(env *Env) *cobra.Command {
	var version uint64
	var del bool
	c := &cobra.Command{
		Use:   "tag URL NAME",
		Short: "Name a version (the latest by default); a tag never moves and keeps its version from GC",
		Example: `  strata tag file://./strata-demo/rollouts before-cleanup
  strata tag file://./strata-demo/rollouts v1 --version 12
  strata tag file://./strata-demo/rollouts before-cleanup --delete`,
		Args: ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			b, err := env.Open(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			if del {
				if version != 0 {
					return usageError{errors.New("--delete takes no --version")}
				}
				if err := table.DeleteTag(c.Context(), b, args[1]); err != nil {
					return err
				}
				fmt.Fprintf(env.Out, "deleted tag %s\n", args[1])
				return nil
			}
			if version == 0 {
				if version, err = table.LatestVersion(c.Context(), b); err != nil {
					return err
				}
			}
			if err := table.CreateTag(c.Context(), b, args[1], version); err != nil {
				return err
			}
			fmt.Fprintf(env.Out, "tagged version %d as %s\n", version, args[1])
			return nil
		},
	}
	c.Flags().Uint64Var(&version, "version", 0, "version to tag (default: latest)")
	c.Flags().BoolVar(&del, "delete", false, "remove the tag (its version is then kept only as long as the retention keeps it)")
	AtLeast(c, 0, "version")
	return c
}
