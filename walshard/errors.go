package walshard

import (
	"errors"
	"fmt"
)

// The errors of package walshard: sentinels for errors.Is, and the typed
// errors that name the shard, the position and the object. Every message
// starts "walshard: ", then "shard %q: " when one shard is concerned.

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

// ErrInvalidOptions: an option out of its range, or options that break a
// relation their documentation states (see Options.Validate).
var ErrInvalidOptions = errors.New("walshard: invalid options")

// ErrCorruptEntry: a WAL entry that does not decode. The shard refuses to
// skip it: the rows in it were acknowledged.
var ErrCorruptEntry = errors.New("walshard: corrupt WAL entry")

// CorruptEntryError names the shard, position and object.
type CorruptEntryError struct {
	Shard    string
	Position uint64
	Key      string
	Reason   string
}

func (e *CorruptEntryError) Error() string {
	return fmt.Sprintf("walshard: shard %q: WAL entry at position %d (%s) is corrupt: %s; refusing to skip acknowledged rows (put the object back from a backup, or give them up: strata repair URL --shard %s --drop-missing)",
		e.Shard, e.Position, e.Key, e.Reason, e.Shard)
}

// Is makes errors.Is(err, ErrCorruptEntry) true.
func (e *CorruptEntryError) Is(target error) bool { return target == ErrCorruptEntry }

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

// ErrPoisonEntry: a WAL entry that decodes but holds rows the table
// cannot take (written by a build that checked less). The shard sets it
// aside under quarantine/ and goes on with the others. Always wrapped in a
// *PoisonEntryError.
var ErrPoisonEntry = errors.New("walshard: WAL entry holds rows the table cannot take")

// PoisonEntryError names the entry and what is wrong with its rows.
type PoisonEntryError struct {
	Shard    string
	Position uint64
	Key      string
	Reason   string
}

func (e *PoisonEntryError) Error() string {
	return fmt.Sprintf("walshard: shard %q: WAL entry at position %d (%s) holds rows the table cannot take: %s",
		e.Shard, e.Position, e.Key, e.Reason)
}

// Is makes errors.Is(err, ErrPoisonEntry) true.
func (e *PoisonEntryError) Is(target error) bool { return target == ErrPoisonEntry }

// ErrFleetMoving: a fresh read found the fleet changing faster than it
// could read a consistent cut three times over; try again.
var ErrFleetMoving = errors.New("walshard: shards changed under the fresh read; try again")

// ErrBadShardID: a shard id that is not 1–128 characters of letters,
// digits, '-', '_' and '.'.
var ErrBadShardID = errors.New("walshard: bad shard id")

// ErrUnknownShard: no shard of that id in the table.
var ErrUnknownShard = errors.New("walshard: unknown shard")

// errTookInLanded: the entry's position held an earlier append's entry
// of this handle, which landed unseen; its rows are taken in, and the
// entry goes to the next position.
var errTookInLanded = errors.New("walshard: an earlier entry took the position")

// errStateTaken: another writer created the state object at that
// sequence number.
var errStateTaken = errors.New("walshard: state sequence number taken")

// errStaleBase: a shard's state knew of a newer merge than the version
// read.
var errStaleBase = errors.New("walshard: the table version read is older than a shard's state")
