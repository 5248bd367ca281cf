package command

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

func newCopy(env *Env) *cobra.Command {
	var from uint64
	var parallel int
	c := &cobra.Command{
		Use:   "copy SRC DST",
		Short: "Copy a table, its versions and their data, to another bucket or folder; run again, it copies what is new",
		Long: `copy makes the table at DST a copy of the table at SRC (any two stores:
S3 to a folder, GCS to S3, a bucket to another): every version SRC keeps
(or from --from-version N), with the data each needs, and the tags of
those versions. Each version's objects go before its manifest, so that the
copy is a table at every moment — at the last version copied — and every
object is read back and checked against the source by its SHA-256.

Run again, copy goes on from the copy's latest version: after a crash or a
kill it resumes (checking, not writing again, what the run before left),
and on a live table it copies only what is new. The copy is a table like
any other: a backup to copy back from, or a read replica. A copy that was
written to since is refused, as is a table a newer build wrote.

Not copied: rows acknowledged through shards and not yet merged (run
strata checkpoint, or let the compactor merge them, first), consumers and
groups, the compaction history, the Iceberg view (strata export iceberg).`,
		Example: `  strata copy 's3://lake/rollouts?endpoint=http://minio:9000' file://./backup/rollouts
  strata copy file://./backup/rollouts 's3://lake/rollouts-restored?endpoint=http://minio:9000'
  strata copy gs://lake/events s3://replica/events --from-version 1200`,
		Args: ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			sh, sp, _, err := splitTableURL(args[0])
			if err != nil {
				return usageError{err}
			}
			dh, dp, _, err := splitTableURL(args[1])
			if err != nil {
				return usageError{err}
			}
			if sh == dh && (sp == dp || strings.HasPrefix(dp+"/", sp+"/") || strings.HasPrefix(sp+"/", dp+"/")) {
				return usageError{fmt.Errorf("%s and %s: a table is not copied into itself, into a folder of its own, or into a folder that holds it", args[0], args[1])}
			}
			src, err := env.Open(ctx, args[0])
			if err != nil {
				return err
			}
			defer src.Close()
			// The source is a table (an error names it, the bucket opened
			// last).
			if _, err := table.LatestVersion(ctx, src); err != nil {
				return err
			}
			dst, err := env.Open(ctx, args[1])
			if err != nil {
				return err
			}
			defer dst.Close()
			if _, err := table.LatestVersion(ctx, dst); errors.Is(err, format.ErrNotFound) {
				// A first copy is a new table: where create would put one.
				if err := checkNewTable(ctx, env, args[1], dst); err != nil {
					return err
				}
			}
			var bar *progress
			res, err := engine.Copy(c.Context(), src, dst, engine.CopyOptions{FromVersion: from, Parallel: parallel,
				Progress: func(p engine.CopyProgress) {
					if bar == nil {
						bar = newProgress(env.Err, "copy", "versions", int64(p.Last-p.Version+1))
					}
					bar.Add(1)
				}})
			if bar != nil {
				bar.Done()
			}
			switch {
			case errors.Is(err, engine.ErrInvalidOptions):
				return usageError{err}
			case err != nil && !errors.Is(err, engine.ErrCopyDiverged) && !errors.Is(err, engine.ErrCopyBehind) && !errors.Is(err, format.ErrUnsupportedFormat) &&
				!errors.Is(err, format.ErrNotFound) && !errors.Is(err, format.ErrCorrupt):
				return fmt.Errorf("%w (the copy holds the versions it copied: run the same command again to go on)", err)
			case err != nil:
				return err
			}
			if len(res.TagsOnlyHere) > 0 {
				fmt.Fprintf(env.Out, "kept the copy's tags the source no longer has: %s\n", strings.Join(res.TagsOnlyHere, ", "))
			}
			if res.UpToDate {
				fmt.Fprintf(env.Out, "up to date: the copy holds versions %d to %d, the source's latest; %d tags copied or moved\n", res.From, res.To, res.Tags)
				return nil
			}
			fmt.Fprintf(env.Out, "copied %d versions (the copy holds %d to %d): %d objects, %d bytes; %d found there already and checked; %d tags\n",
				res.Versions, res.From, res.To, res.Objects, res.Bytes, res.Checked, res.Tags)
			return nil
		},
	}
	c.Flags().Uint64Var(&from, "from-version", 0, "the first version of a first copy (default: the oldest the source keeps)")
	c.Flags().IntVar(&parallel, "parallel", 8, "objects copied at once")
	AtLeast(c, 1, "parallel")
	AtLeast(c, 0, "from-version")
	return c
}
