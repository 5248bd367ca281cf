package command

import (
	"log/slog"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
)

// handle is a command's engine handle on the table in b, which need not
// exist yet: it writes directly (no shard), starts no background work and
// logs nothing (the command says what it did); its commits name the
// command's verb ("strata (update)"). Stop it when done.
func handle(b blob.Bucket) (*engine.DB, error) {
	return engine.OpenNew(b, &engine.Options{Writer: "strata", Log: slog.New(slog.DiscardHandler)})
}
