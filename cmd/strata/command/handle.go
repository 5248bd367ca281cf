package command

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
)

// handle is a command's engine handle on the table in b, which need not
// exist yet: it writes directly (no shard), starts no background work and
// logs nothing (the command says what it did); its commits name the
// command's verb ("strata (update)"). Close it when done (closeDB).
func handle(b blob.Bucket) (*engine.DB, error) {
	return engine.OpenNew(b, &engine.Options{Writer: "strata", Log: slog.New(slog.DiscardHandler)})
}

// closeDB closes db as a command ends, joining a failure to close it to
// the command's error (*err), so that none goes unsaid.
func closeDB(db *engine.DB, err *error) {
	if cerr := db.Close(); cerr != nil {
		*err = errors.Join(*err, fmt.Errorf("closing the table's handle: %w", cerr))
	}
}
