package command

import (
	"context"
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

// openHandle opens the table at u for a verb's direct commits, as handle
// does; closing it (closeDB) closes its bucket.
func openHandle(ctx context.Context, env *Env, u string) (*engine.DB, error) {
	b, err := env.Open(ctx, u)
	if err != nil {
		return nil, err
	}
	db, err := engine.OpenNew(b, &engine.Options{Writer: "strata", CloseBucket: true, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Close()
		return nil, err
	}
	return db, nil
}

// closeDB closes db as a command ends, joining a failure to close it to
// the command's error (*err), so that none goes unsaid.
func closeDB(db *engine.DB, err *error) {
	if cerr := db.Close(); cerr != nil {
		*err = errors.Join(*err, fmt.Errorf("closing the table's handle: %w", cerr))
	}
}
