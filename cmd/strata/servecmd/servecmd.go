// Package servecmd holds the strata verbs that link the HTTP server
// (serve, token) and builds the whole strata command: package command's
// verbs and these. strata-full runs it; strata-engine runs command's
// verbs alone, so that it links neither the server, its Prometheus
// metrics and Iceberg catalog, nor the GCS driver, and starts in a
// fraction of the time.
package servecmd

import (
	"github.com/spf13/cobra"

	"github.com/stratadb/strata/cmd/strata/command"
)

// Verbs are this package's verbs, by name: the strata front runs them
// through strata-full.
var Verbs = []string{"serve", "token"}

// NewRoot builds the whole strata command.
func NewRoot(env *command.Env) *cobra.Command {
	return command.NewRoot(env, newServe, newToken)
}
