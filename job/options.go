package job

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
)

// DefaultHolder names the Job in the tables' leases.
const DefaultHolder = engine.DefaultHolder

// DefaultRediscover is how often Loop looks again for the tables under
// Options.Under: a LIST a folder and two a table each time.
const DefaultRediscover = time.Minute

// EnsureDefaults returns a copy of o (nil: the zero Options) with every
// unset field at its default.
func (o *Options) EnsureDefaults() *Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = engine.DefaultLeaseTTL
	}
	if c.Holder == "" {
		c.Holder = DefaultHolder
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Open == nil {
		c.Open = blob.Open
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rediscover <= 0 {
		c.Rediscover = DefaultRediscover
	}
	if c.AdoptAfter == 0 {
		c.AdoptAfter = 15 * time.Minute
	}
	if c.Fleet.Commit.Writer == "" {
		c.Fleet.Commit.Writer = c.Holder + " (merge)"
	}
	if c.Fleet.MemoryBudget == 0 {
		// The merges hold to the compactions' budget: one runs at a time.
		c.Fleet.MemoryBudget = c.MemoryBudget
		if c.Fleet.MemoryBudget <= 0 {
			c.Fleet.MemoryBudget = engine.DefaultMemoryBudget
		}
	}
	return &c
}

// Validate checks the options: no negative history or lease, a lease of
// at least engine.MinLeaseTTL, a memory budget of at least
// engine.MinMemoryBudget, an exporter when Iceberg is set, and
// valid policies. No tables is valid:
// a pass over an empty bucket does nothing.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	if o.History < 0 || o.LeaseTTL < 0 {
		return fmt.Errorf("%w: job Options: History and LeaseTTL must not be negative", engine.ErrInvalidCompaction)
	}
	if o.LeaseTTL > 0 && o.LeaseTTL < engine.MinLeaseTTL {
		return fmt.Errorf("%w: job Options: LeaseTTL %v is below %v", engine.ErrInvalidCompaction, o.LeaseTTL, engine.MinLeaseTTL)
	}
	if o.Iceberg && o.Export == nil {
		return fmt.Errorf("%w: job Options: Iceberg without an Export (a program that exports passes engine/iceberg.ExportKept)", engine.ErrInvalidOptions)
	}
	if err := (&engine.CompactTune{MemoryBudget: o.MemoryBudget}).Validate(); err != nil {
		return err
	}
	if err := o.Policy.Validate(); err != nil {
		return err
	}
	if err := o.GC.Validate(); err != nil {
		return err
	}
	return o.Fleet.Validate()
}

// FixedOverhead is what a Job holds besides its memory budget, and what
// its process's resident memory may pass the budget by: the binary's code
// mapped from its file, the Go runtime and the package initialisation of
// the libraries it links (75 MiB idle, measured), the manifest of the
// table it works on, and garbage not yet collected, which Go's soft limit
// lets grow to goOverhead past the budget. Measured: a compaction within
// the budget and 18 MiB, fleet merges that fill their budget within it
// and 170 MiB (docs/operations.md, "The Job's memory"). A collection
// comes on top, holding what its own bounds say.
const FixedOverhead = 192 << 20

// goOverhead is the part of FixedOverhead that Go's soft memory limit
// allows beyond the budget; the rest is the binary's code, which the
// limit does not count.
const goOverhead = 64 << 20

// MemoryLimit is the Go runtime's soft memory limit for a Job of the
// given memory budget (0: the default), which strata-compactor sets: the
// budget and goOverhead. Under it the heap is collected before it grows
// to twice what is live, so the process's peak RSS stays within the
// budget and FixedOverhead.
func MemoryLimit(budget int64) int64 {
	if budget <= 0 {
		budget = engine.DefaultMemoryBudget
	}
	return budget + goOverhead
}

// compactsOnly reports whether this Job is a part of a split compaction
// other than part 0 (Policy.Part): it compacts its part of each table and
// leaves merges, adoptions, the Iceberg view and collection to part 0, so
// that those still run once a pass.
func (o *Options) compactsOnly() bool {
	return o.Policy.Part.Of > 1 && o.Policy.Part.Index > 0
}
