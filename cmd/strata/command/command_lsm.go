package command

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/internal/buildinfo"
)

// newLSM makes flush, merge and checkpoint: they ask a server, which owns
// its shards, to act on them.
func newLSM(env *Env, verb, short string, act func(ctx context.Context, c *client.Client, table string) error) *cobra.Command {
	var srv remote
	c := &cobra.Command{
		Use:   verb + " TABLE --server URL",
		Short: short,
		Example: fmt.Sprintf(`  strata %s rollouts --server http://127.0.0.1:8080
  STRATA_TOKEN=secret strata %s rollouts --server http://strata:8080`, verb, verb),
		Args: ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if srv.server == "" {
				return usageError{fmt.Errorf("%s needs --server URL", verb)}
			}
			cl, err := srv.client(args[0])
			if err != nil {
				return err
			}
			if err := act(c.Context(), cl, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(env.Out, "%s %s: done\n", verb, args[0])
			return nil
		},
	}
	srv.flags(c.Flags())
	return c
}

func lsmVerbs(env *Env) []*cobra.Command {
	return []*cobra.Command{
		newLSM(env, "flush", "Ask a server to seal its memtable of a table into a generation",
			func(ctx context.Context, c *client.Client, t string) error { return c.Flush(ctx, t) }),
		newLSM(env, "merge", "Ask a server to merge every shard's flushed generations into the table (a fleet merge)",
			func(ctx context.Context, c *client.Client, t string) error { return c.Merge(ctx, t) }),
		newLSM(env, "checkpoint", "Flush the server's shard, then wait until every shard's generations that existed are merged",
			func(ctx context.Context, c *client.Client, t string) error { return c.CheckpointLSM(ctx, t) }),
	}
}

func newVersion(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this build",
		Args:  ExactArgs(0),
		RunE: func(c *cobra.Command, args []string) error {
			fmt.Fprintf(env.Out, "strata %s\n", buildinfo.Get())
			return nil
		},
	}
}
