package servecmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/cmd/strata/command"
	"github.com/stratadb/strata/server"
)

func newToken(env *command.Env) *cobra.Command {
	c := &cobra.Command{
		Use:   "token",
		Short: "Make tokens for strata serve --tokens",
		Args:  command.ExactArgs(0),
	}
	var name string
	var grants []string
	nc := &cobra.Command{
		Use:   "new",
		Short: "Print a fresh random token, once, and its line for a tokens file",
		Long: `new prints a fresh random token and the line to add to the file that
strata serve --tokens reads: the token's SHA-256, its name and its grants.
The file never holds the token itself; the token is shown once, here.

A grant is VERB:PATTERN; PATTERN matches table names, its * standing for
any run of characters, slashes too. The verbs:

  read    describe, scan, count, take, versions, changes, the lists and stats
  append  append rows, flush and merge; Iceberg catalog commits
  write   update, delete, upsert, overwrite, alter, restore, and what append may
  admin   create, drop, compact, gc, tags, indexes, consumers; everything

/metrics needs read:* (unless strata serve --open-metrics).`,
		Example: `  strata token new --name dashboard --grant 'read:*'
  strata token new --name fleet --grant 'append:runs/*' --grant 'read:runs/*'`,
		Args: command.ExactArgs(0),
		RunE: func(c *cobra.Command, args []string) error {
			if len(grants) == 0 {
				return command.UsageError(errors.New("token new needs at least one --grant VERB:PATTERN, e.g. --grant 'read:runs/*'"))
			}
			var gs []server.Grant
			for _, g := range grants {
				grant, err := server.ParseGrant(g)
				if err != nil {
					return command.UsageError(fmt.Errorf("--grant: %w", err))
				}
				gs = append(gs, grant)
			}
			token, line, err := server.NewToken(name, gs)
			if err != nil {
				return command.UsageError(err)
			}
			fmt.Fprintf(env.Out, "token: %s\nline:  %s\n", token, line)
			return nil
		},
	}
	nc.Flags().StringVar(&name, "name", "", "the token's name, as the access log shows it")
	nc.Flags().StringArrayVar(&grants, "grant", nil, "VERB:PATTERN (repeat for more)")
	_ = nc.MarkFlagRequired("name")
	c.AddCommand(nc)
	return c
}
