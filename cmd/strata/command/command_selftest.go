package command

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/internal/cli"
)

func newSelftest(env *Env) *cobra.Command {
	var racers int
	c := &cobra.Command{
		Use:   "selftest URL",
		Short: "Check that a store has the atomic conditional create Strata needs",
		Long: `selftest races concurrent conditional creates of one fresh key and checks
that exactly one wins and every other is refused; that a later create of the
same key is refused; that the object reads back whole, by GET and by ranged
reads; and that it lists and deletes. It removes what it wrote.

It exits 1 when the store is unsafe for Strata, for example a store that
ignores conditional writes (GCS through its XML API, old MinIO releases).`,
		Example: `  strata selftest file://./strata-data
  strata selftest 's3://my-bucket/tables?endpoint=http://127.0.0.1:9000&region=us-east-1'
  strata selftest gs://my-bucket/tables`,
		Args: ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			b, err := env.Open(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			rep, err := blob.SelfTest(c.Context(), b, racers)
			fmt.Fprintf(env.Out, "store:     %s\n", args[0])
			fmt.Fprintf(env.Out, "race:      %d concurrent conditional creates of %s: %d won, %d refused (%s)\n",
				rep.Racers, rep.Key, rep.Winners, rep.Losers, rep.RaceDuration.Round(1e5))
			if err != nil {
				if errors.Is(err, blob.ErrNoConditionalWrites) {
					fmt.Fprintln(env.Out, "result:    UNSAFE: the store does not honour conditional creates; Strata cannot commit safely on it")
				} else {
					fmt.Fprintln(env.Out, "result:    FAILED")
				}
				return err
			}
			fmt.Fprintf(env.Out, "readback:  %d bytes by GET and by ranged read: ok\n", rep.ObjectBytes)
			fmt.Fprintln(env.Out, "result:    ok: conditional creates are atomic; this store can hold Strata tables")
			return nil
		},
	}
	c.Flags().IntVar(&racers, "racers", 16, fmt.Sprintf("concurrent conditional creates to race (at most %d: each holds a body of %d KiB)",
		blob.MaxSelfTestRacers, blob.SelfTestObjectBytes>>10))
	cli.Bound(c.Flags(), "racers", 1, blob.MaxSelfTestRacers)
	return c
}
