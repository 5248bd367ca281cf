package command

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

func newInspect(env *Env) *cobra.Command {
	var version uint64
	c := &cobra.Command{
		Use:     "inspect URL",
		Short:   "Print a version's manifest as JSON, every fragment's object key included",
		Example: `  strata inspect file://./strata-demo/rollouts --version 2`,
		Args:    ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			b, err := env.Open(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			s, err := table.Open(c.Context(), b, &table.OpenOptions{Version: version})
			if err != nil {
				return err
			}
			m := s.Manifest()
			out := struct {
				*format.Manifest
				Schema      string             `json:"schema"`
				Transaction format.Transaction `json:"transaction"`
			}{m, m.Schema().String(), m.Transaction}
			enc := json.NewEncoder(env.Out)
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		},
	}
	c.Flags().Uint64Var(&version, "version", 0, "version (default: latest)")
	AtLeast(c, 0, "version")
	return c
}
