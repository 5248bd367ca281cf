package walshard

import (
	"fmt"
	"time"

	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/walshard/wal"
)

// Options configure a shard handle. Zero values mean defaults.
type Options struct {
	// Shard is the shard id, chosen by the caller (a pod name, say).
	Shard string
	// GroupBytes bounds one WAL entry (default 8 MiB); GroupWait is how
	// long the writer waits to gather concurrent appends into one entry
	// (default 2ms).
	GroupBytes int64
	GroupWait  time.Duration
	// FlushBytes and FlushRows: the memtable is flushed in the background
	// when it passes either (defaults 64 MiB, no row bound). FlushInterval
	// also flushes a non-empty memtable that old (0: never).
	FlushBytes    int64
	FlushRows     int64
	FlushInterval time.Duration
	// ReuseBytes, when above 0, writes data entries whose rows take that
	// many bytes in memory as Parquet fragments, and a flush adds each
	// entry of at least that many bytes to the table as it is, rather than writing its rows a second time into the
	// generation's object: the rows cross to the store once. Smaller
	// entries are gathered into the generation's object as usual (each
	// reused entry is one more fragment until compaction folds it).
	// Default DefaultReuseBytes. Negative: off, and entries are written in
	// the binary form that builds before it read: for a fleet whose
	// workers, servers or compactor Job still run such a build (they
	// cannot read Parquet entries), until all are upgraded.
	ReuseBytes int64
	// MaxMemtableBytes: appends wait while the memtable holds more
	// (default 256 MiB). MaxPendingGenerations: flushes wait while more
	// generations await merging (default 64).
	MaxMemtableBytes      int64
	MaxPendingGenerations int
	// MergeInterval merges in the background that often (0: never: a
	// compactor Job's fleet merge takes the generations). With FleetMerge
	// each of those merges is a fleet merge (fleetmerge.Merge): every
	// shard's flushed generations, not only this one's.
	// MergeMaxGenerations and MergeMaxBytes cap one merge pass (defaults
	// 64 and 1 GiB).
	FleetMerge          bool
	MergeInterval       time.Duration
	MergeMaxGenerations int
	MergeMaxBytes       int64
	// ResolveWithin: how long an append whose WAL create got no answer
	// goes on learning whether its entry landed while the store does not
	// answer (reading the position again, and creating the entry again:
	// both are safe to repeat) before it fails with ErrAppendUnknown.
	// Default 10s, and never past the commit budget; negative: it fails
	// at the first unanswered read. A store that is back within it costs
	// the append time, not an unknown outcome.
	ResolveWithin time.Duration
	// Commit tunes the merge commits.
	Commit commit.Options
	// Listener is told of what the shard does (the engine's
	// EventListener hangs here).
	Listener Listener
	// SetAsideLost is for an operator's repair (strata repair --shard
	// --drop-missing), when the store lost or damaged a WAL entry and no
	// backup holds it: replay sets aside a position between the flushed
	// one and the end of the log that is empty (*MissingEntryError) or
	// holds an entry that does not decode (*CorruptEntryError) instead of
	// refusing to open. The entry's rows are lost. Its position gets a
	// fence, so that the log is dense again and later opens replay past
	// it; quarantine/ keeps a copy of a damaged entry, or a note for a
	// missing one, and Quarantined records it.
	SetAsideLost bool
	// SchemaLease: the shard begins a WAL write it will acknowledge only
	// under a schema it checked within this long (one request, see
	// evolve.SchemaLease); 0 means evolve.SchemaLease. Schema changes that
	// take values away wait commit.Options.SchemaWait, which must be
	// longer: a shorter lease is safe, a longer one is not.
	SchemaLease time.Duration
}

// EnsureDefaults returns a copy of o (nil: the zero Options) with every
// unset field at its default. o itself is not changed.
func (o *Options) EnsureDefaults() *Options {
	var c Options
	if o != nil {
		c = *o
	}
	c = c.withDefaults()
	return &c
}

// Validate checks the options: a valid shard id, no negative sizes or
// times, and valid commit options. (A memtable bound below FlushBytes is
// allowed: an append that finds the memtable full starts a flush itself.)
// Open calls it.
func (o *Options) Validate() error {
	if o == nil {
		return wal.CheckShardID("")
	}
	if err := wal.CheckShardID(o.Shard); err != nil {
		return err
	}
	if o.GroupBytes < 0 || o.GroupWait < 0 || o.FlushBytes < 0 || o.FlushRows < 0 || o.FlushInterval < 0 || o.MaxMemtableBytes < 0 ||
		o.MaxPendingGenerations < 0 || o.MergeInterval < 0 || o.MergeMaxGenerations < 0 || o.MergeMaxBytes < 0 || o.SchemaLease < 0 {
		return fmt.Errorf("%w: sizes, counts and intervals must not be negative", wal.ErrInvalidOptions)
	}
	if err := o.Commit.Validate(); err != nil {
		return fmt.Errorf("walshard: Commit: %w", err)
	}
	return nil
}

// DefaultReuseBytes is Options.ReuseBytes's default: an entry of 128 KiB
// or more (an append of about 50 rollouts) joins the table as it is.
const DefaultReuseBytes = 128 << 10

func (o Options) withDefaults() Options {
	if o.ReuseBytes == 0 {
		o.ReuseBytes = DefaultReuseBytes
	}
	if o.GroupBytes <= 0 {
		o.GroupBytes = 8 << 20
	}
	if o.GroupWait <= 0 {
		o.GroupWait = 2 * time.Millisecond
	}
	if o.FlushBytes <= 0 {
		o.FlushBytes = 64 << 20
	}
	if o.MaxMemtableBytes <= 0 {
		o.MaxMemtableBytes = 256 << 20
	}
	if o.MaxPendingGenerations <= 0 {
		o.MaxPendingGenerations = 64
	}
	if o.MergeMaxGenerations <= 0 {
		o.MergeMaxGenerations = 64
	}
	if o.MergeMaxBytes <= 0 {
		o.MergeMaxBytes = 1 << 30
	}
	if o.SchemaLease <= 0 {
		o.SchemaLease = evolve.SchemaLease
	}
	if o.ResolveWithin == 0 {
		o.ResolveWithin = 10 * time.Second
	}
	if o.Commit.Writer == "" {
		o.Commit.Writer = "shard:" + o.Shard
	}
	if o.Commit.Now == nil {
		o.Commit.Now = time.Now
	}
	return o
}
