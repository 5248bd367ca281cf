package command

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table/format"
)

func newOverwrite(env *Env) *cobra.Command {
	var key, inFormat string
	var ignoreUnknown bool
	c := &cobra.Command{
		Use:   "overwrite URL [FILE...] (- for standard input, with --format)",
		Short: "Replace every row of the table with the rows of files, in one commit",
		Long: `overwrite reads the files as append does (.parquet, .csv, .jsonl), checks every
row against the table's schema, and commits one version that holds those rows
and no other: the table's schema, tags and history stay, and an earlier
version can still be read or restored. With no file, the table is left empty.

Rows acknowledged through writers' shards and not yet merged are merged on
top of it; an append, merge, delete or compaction planned before it and
landing after fails or plans again on the overwritten table. Run again
without a key, it overwrites again (dropping what was written meanwhile);
with --idempotency-key, running it again after a lost answer overwrites
nothing and answers the first one's version. At most 1 GiB of input, held
in memory.`,
		Example: `  strata overwrite file://./events snapshot.parquet
  strata overwrite file://./events day.jsonl --idempotency-key daily-2026-12-07
  strata overwrite file://./events          # every row gone; the history stays`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) < 1 {
				return usageError{fmt.Errorf("overwrite needs a URL\n\n%s", c.UsageString())}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) (err error) {
			var name *format.Idempotency
			if key != "" {
				name = &format.Idempotency{Producer: "key:" + key}
				if err := name.Check(); err != nil {
					return usageError{fmt.Errorf("--idempotency-key: %w", err)}
				}
			}
			files, err := takeInput(env, args[1:], inFormat)
			if err != nil {
				return err
			}
			defer files.remove()
			in, err := holdInput(files, ignoreUnknown, "overwritten")
			if err != nil {
				return err
			}
			defer in.release()
			tb, err := openHandle(c.Context(), env, args[0])
			if err != nil {
				return err
			}
			defer closeDB(tb, &err)
			res, err := tb.Overwrite(c.Context(), in.rows(name))
			err = in.named(err)
			switch {
			case in.err != nil:
				return in.err
			case errors.Is(err, engine.ErrOutcomeUnknown) && name != nil:
				return fmt.Errorf("%w; run the same command again: under its key it overwrites once", err)
			case errors.Is(err, engine.ErrOutcomeUnknown):
				return fmt.Errorf("%w; see `strata versions` for whether it landed (an overwrite without --idempotency-key run again overwrites again)", err)
			case err != nil:
				return fmt.Errorf("%w (nothing was overwritten)", err)
			case res.Duplicate:
				fmt.Fprintf(env.Out, "already overwritten under this key by version %d (%d rows); nothing committed\n", res.Version, res.Rows)
			default:
				fmt.Fprintf(env.Out, "overwrote the table with %d rows (version %d)\n", res.Rows, res.Version)
			}
			return nil
		},
	}
	c.Flags().StringVar(&key, "idempotency-key", "", "name the overwrite: run again with the same key, it overwrites nothing")
	c.Flags().BoolVar(&ignoreUnknown, "ignore-unknown-columns", false, "drop input columns the table does not have instead of refusing the input")
	c.Flags().StringVar(&inFormat, "format", "", "csv, jsonl or parquet: the format of standard input (-), or of files whose names do not say")
	return c
}
