package wal

import (
	"errors"
	"fmt"
)

// The errors of a shard's objects: sentinels for errors.Is, and the typed
// errors that name the shard, the position and the object. Every message
// starts "walshard: ", then "shard %q: " when one shard is concerned.

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

// ErrBadShardID: a shard id that is not 1–128 characters of letters,
// digits, '-', '_' and '.'.
var ErrBadShardID = errors.New("walshard: bad shard id")

// ErrTookInLanded: the entry's position held an earlier append's entry
// of this handle, which landed unseen; its rows are taken in, and the
// entry goes to the next position.
var ErrTookInLanded = errors.New("walshard: an earlier entry took the position")

// ErrStateTaken: another writer created the state object at that
// sequence number.
var ErrStateTaken = errors.New("walshard: state sequence number taken")

// ErrStaleBase: a shard's state knew of a newer merge than the version
// read.
var ErrStaleBase = errors.New("walshard: the table version read is older than a shard's state")
