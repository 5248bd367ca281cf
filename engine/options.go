package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stratadb/strata/compactor"
)

// Options configure a DB. A nil *Options, or a zero field, means the
// default.
type Options struct {
	// Name names the table in events and logs (its URL, or a server's name
	// for it).
	Name string
	// Writer names this process in the commits it makes and in the
	// table's lease (default "strata").
	Writer string
	// Shard, when Shard.Shard is set, is this process's own WAL shard:
	// appends go through it (it is opened, claiming a new epoch, on the
	// first append), and the DB flushes it and merges the fleet's
	// generations on its own schedule (MergeInterval; the shard's own
	// merge loop stays off; its Listener is the DB's, whose events reach
	// Listener). Unset, appends commit directly.
	Shard ShardOptions
	// MergeInterval: with a shard, the DB merges its flushed generations
	// this often — with FleetMerge, every shard's (a fleet merge) — (0:
	// never: the compactor Job's pass does).
	MergeInterval time.Duration
	FleetMerge    bool
	// Policy says when compaction is due, for every driver alike (the
	// server's POST …/compact and the Job's pass).
	Policy Policy
	// GC is the garbage collection policy of Maintain and GC.
	GC GCPolicy
	// LeaseTTL: the table's compaction lease, renewed while a compaction
	// runs (default 30m). History: run records kept (default 100).
	LeaseTTL time.Duration
	History  int
	// Fleet tunes merges; Commit the DB's own commits.
	Fleet  FleetOptions
	Commit CommitOptions
	// Listener is told of what the DB does; its nil fields log through Log
	// (default slog.Default()).
	Listener EventListener
	Log      *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// CloseBucket: Close closes the bucket as well.
	CloseBucket bool
}

// ErrInvalidOptions: an option out of its range.
var ErrInvalidOptions = errors.New("engine: invalid options")

// EnsureDefaults returns a copy of o (nil: the zero Options) with every
// unset field at its default. o itself is not changed.
func (o *Options) EnsureDefaults() *Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Writer == "" {
		c.Writer = "strata"
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 30 * time.Minute
	}
	if c.History <= 0 {
		c.History = 100
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Commit.Writer == "" {
		c.Commit.Writer = c.Writer
	}
	c.Listener = c.Listener.withDefaults(c.Log)
	return &c
}

// Validate checks the options and the packages' options they carry.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	if o.MergeInterval < 0 || o.LeaseTTL < 0 || o.History < 0 {
		return fmt.Errorf("%w: MergeInterval, LeaseTTL and History must not be negative", ErrInvalidOptions)
	}
	if o.LeaseTTL > 0 && o.LeaseTTL < compactor.MinLeaseTTL {
		return fmt.Errorf("%w: LeaseTTL %v is below %v", ErrInvalidOptions, o.LeaseTTL, compactor.MinLeaseTTL)
	}
	if err := o.Policy.Validate(); err != nil {
		return err
	}
	if err := o.GC.Validate(); err != nil {
		return err
	}
	if err := o.Fleet.Validate(); err != nil {
		return err
	}
	if err := o.Commit.Validate(); err != nil {
		return err
	}
	if o.Shard.Shard != "" {
		if err := o.Shard.Validate(); err != nil {
			return err
		}
	}
	return nil
}
