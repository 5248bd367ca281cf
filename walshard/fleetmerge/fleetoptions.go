package fleetmerge

import (
	"fmt"

	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/walshard/wal"
)

// Options tune a fleet merge. Zero values mean defaults.
type Options struct {
	// MaxGenerations caps the generations of one shard per pass (default
	// 64); MaxBytes caps the bytes of one pass, and of one shard's
	// generations in it but the first (default 256 MiB, at most what
	// MemoryBudget leaves the flush objects).
	MaxGenerations int
	MaxBytes       int64
	// MemoryBudget, when above 0, bounds what a pass holds at once: the
	// flush objects it reads, their rows when it decodes them, and the
	// merged fragment's row group (fleetbudget.go). 0: no budget (a pass
	// holds every shard's newest flush object while it plans, and the
	// rows of up to MaxBytes of them).
	MemoryBudget int64
	// Parallelism: shard states read at once (default 32).
	Parallelism int
	// Commit tunes the merge commit.
	Commit commit.Options
	// Memory, when set, is what the fleet merges of this table remember
	// between passes (one per table): shards whose newest flush object a
	// pass found nothing to merge in are not read again until they
	// flush, and a pass that finds nothing new reads no manifest.
	Memory *Memory
}

// EnsureDefaults returns a copy of o (nil: the zero Options) with
// every unset field at its default. o itself is not changed.
func (o *Options) EnsureDefaults() *Options {
	c := o.withDefaults()
	return &c
}

// Validate checks the options: no negative bounds, and valid commit
// options. Merge calls it.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	if o.MaxGenerations < 0 || o.MaxBytes < 0 || o.Parallelism < 0 || o.MemoryBudget < 0 {
		return fmt.Errorf("%w: MaxGenerations, MaxBytes, Parallelism and MemoryBudget must not be negative", wal.ErrInvalidOptions)
	}
	if err := o.Commit.Validate(); err != nil {
		return fmt.Errorf("walshard: Commit: %w", err)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.MaxGenerations <= 0 {
		c.MaxGenerations = 64
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 256 << 20
	}
	if c.MemoryBudget > 0 {
		c.MaxBytes = min(c.MaxBytes, c.MemoryBudget-fleetOutputShare(c.MemoryBudget))
	}
	if c.Parallelism <= 0 {
		c.Parallelism = 32
	}
	if c.Commit.Writer == "" {
		c.Commit.Writer = "fleet-merge"
	}
	return c
}

// Result says what a fleet merge did.
type Result struct {
	Announced   int    // shards with announced generations
	Shards      int    // shards whose watermark the commit moved
	Generations int    // generations it added
	Rows        int64  // rows they hold
	Version     uint64 // the version that holds them (0: nothing committed)
	// Failed names shards whose state could not be read; the others were
	// merged. The error joins their errors.
	Failed []string
	// Merged is each shard's watermark after the pass (shards merged).
	Merged map[string]uint64
	// PeakMemory is the most a pass held at once by its count (with
	// Options.MemoryBudget; 0 without).
	PeakMemory int64
}
