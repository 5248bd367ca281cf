package walshard

import (
	"errors"
	"fmt"
)

// The errors of package walshard: sentinels for errors.Is, and the typed
// errors that name the shard, the position and the object. Every message
// starts "walshard: ", then "shard %q: " when one shard is concerned. The
// errors of the objects themselves (a corrupt or poisoned WAL entry, a bad
// shard id, invalid options) are package wal's.

// Errors.
var (
	// ErrFenced: a newer owner opened the shard; this handle can do
	// nothing more. Reopen the shard to write again.
	ErrFenced = errors.New("walshard: fenced by a newer owner of the shard")
	// ErrClosed: the shard handle was closed.
	ErrClosed = errors.New("walshard: shard closed")
	// ErrAppendUnknown: an append whose rows may or may not be stored (at
	// most once). Either its WAL entry's create got no answer and the store
	// did not answer the read that would tell (the error also wraps the
	// store's): the handle's next append, or a reopening, finds the entry if
	// it landed and stores its rows. Or its entry landed where a newer
	// owner may or may not replay it: the handle is fenced. Appending the
	// same rows again may store them twice.
	ErrAppendUnknown = errors.New("walshard: outcome of the append unknown")
	// ErrMergeRunning: a merge of this shard is already running.
	ErrMergeRunning = errors.New("walshard: a merge of this shard is already running")
)

// ErrMissingEntry: a WAL position between the flushed one and the end of
// the log holds nothing. Positions there are written densely, so the
// entry — acknowledged rows — was lost from the bucket; the shard refuses
// to open rather than skip it. Always wrapped in a *MissingEntryError.
var ErrMissingEntry = errors.New("walshard: WAL entry missing")

// MissingEntryError names the shard and the empty position.
type MissingEntryError struct {
	Shard    string
	Position uint64
	Key      string
	End      uint64 // the log's end (the new owner's fence)
}

func (e *MissingEntryError) Error() string {
	return fmt.Sprintf("walshard: shard %q: WAL entry at position %d (%s) is missing, below the log's end at %d: its acknowledged rows are gone from the bucket; refusing to skip them (put the object back from a backup, or give them up: strata repair URL --shard %s --drop-missing)",
		e.Shard, e.Position, e.Key, e.End, e.Shard)
}

// Is makes errors.Is(err, ErrMissingEntry) true.
func (e *MissingEntryError) Is(target error) bool { return target == ErrMissingEntry }

// ErrFleetMoving: a fresh read found the fleet changing faster than it
// could read a consistent cut three times over; try again.
var ErrFleetMoving = errors.New("walshard: shards changed under the fresh read; try again")

// ErrUnknownShard: no shard of that id in the table.
var ErrUnknownShard = errors.New("walshard: unknown shard")
