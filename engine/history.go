package engine

import (
	"context"
	"errors"
	"time"

	"github.com/stratadb/strata/compactor"
)

// failingKinds is what this DB knows of the table's history: which kinds
// of run last recorded a failure (read once, then kept up to date by the
// records this DB writes).
type failingKinds struct {
	known bool
	kinds map[string]bool
}

// record adds run to the table's history; a failure to is logged (the
// history is what operators read, not what the table's rows rest on).
func (db *DB) record(ctx context.Context, run Run, what string) {
	rec, err := compactor.RecordRun(context.WithoutCancel(ctx), db.b, run, db.opts.History)
	if err != nil {
		db.opts.Log.Warn("recording "+what+" failed", "table", db.opts.Name, "error", err.Error())
		return
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	db.mu.failing = failingKinds{known: true, kinds: map[string]bool{}}
	for k, ks := range rec.Kinds {
		db.mu.failing.kinds[k] = ks.LastError != ""
	}
}

// failing tells whether the newest recorded run of kind failed, reading
// the history the first time this DB needs to know (false when it cannot).
func (db *DB) failing(ctx context.Context, kind string) bool {
	db.mu.Lock()
	f := db.mu.failing
	db.mu.Unlock()
	if f.known {
		return f.kinds[kind]
	}
	st, err := compactor.ReadStatus(context.WithoutCancel(ctx), db.b, 1)
	if err != nil {
		return false
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	db.mu.failing = failingKinds{known: true, kinds: map[string]bool{}}
	for k, ks := range st.Kinds {
		db.mu.failing.kinds[k] = ks.LastError != ""
	}
	return db.mu.failing.kinds[kind]
}

// recordOutcome records a run of kind that started at started (the DB's
// clock) and took d: always when it failed or when worth says so (it did
// something operators look for in the history), and otherwise only when it
// clears the kind's recorded failure — runs that go every pass and change
// nothing cost no requests. A run the context cancelled is not recorded.
func (db *DB) recordOutcome(ctx context.Context, run Run, d time.Duration, err error, worth bool) {
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) && ctx.Err() != nil {
		return
	}
	run.DurationS = d.Seconds()
	if err != nil {
		run.Error = err.Error()
	} else if !worth && !db.failing(ctx, run.Kind) {
		return
	}
	db.record(ctx, run, "the "+run.Kind+" run")
}
