package compactor

import (
	"errors"
	"fmt"
)

// Every options type of this package follows one idiom: a nil pointer or a
// zero field means the default; EnsureDefaults returns a filled copy and
// never changes its receiver; Validate checks the filled options, including
// the relations their documentation states, and every function taking them
// calls it first.

// ErrInvalidOptions: an option out of its range, or options that break a
// relation their documentation states.
var ErrInvalidOptions = errors.New("compactor: invalid options")

// EnsureDefaults returns a copy of p (nil: the zero Policy) with every
// unset field at its default.
func (p *Policy) EnsureDefaults() *Policy {
	var c Policy
	if p != nil {
		c = *p
	}
	c = c.withDefaults()
	return &c
}

// Validate checks the policy: no negative bounds, DeletedFraction at most
// 1, quiet windows of real hours, and SmallRows and SmallBytes at most
// TargetRows and TargetBytes (else a run's outputs would be small again and
// rewritten on every run).
func (p *Policy) Validate() error {
	if p == nil {
		return nil
	}
	if p.MinFragments < 0 || p.TargetRows < 0 || p.TargetBytes < 0 || p.MaxSourceFragments < 0 || p.MaxSourceBytes < 0 ||
		p.DeletedFraction < 0 || p.SmallRows < 0 || p.SmallBytes < 0 {
		return fmt.Errorf("%w: Policy: counts, sizes and fractions must not be negative", ErrInvalidOptions)
	}
	if err := p.Part.validate(); err != nil {
		return err
	}
	if p.DeletedFraction > 1 {
		return fmt.Errorf("%w: Policy: DeletedFraction %v is above 1", ErrInvalidOptions, p.DeletedFraction)
	}
	for _, w := range p.QuietWindows {
		if w.Start < 0 || w.Start > 23 || w.End < 0 || w.End > 24 {
			return fmt.Errorf("%w: Policy: quiet window %d-%d is not in UTC hours", ErrInvalidOptions, w.Start, w.End)
		}
	}
	c := p.EnsureDefaults()
	if c.SmallRows > c.TargetRows || c.SmallBytes > c.TargetBytes {
		return fmt.Errorf("%w: Policy: SmallRows %d and SmallBytes %d must be at most TargetRows %d and TargetBytes %d",
			ErrInvalidOptions, c.SmallRows, c.SmallBytes, c.TargetRows, c.TargetBytes)
	}
	return nil
}

// EnsureDefaults returns a copy of p (nil: the zero GCPolicy) with every
// unset field at its default; RetainFor and SafetyAge below MinRetain are
// raised to it, as their documentation says.
func (p *GCPolicy) EnsureDefaults() *GCPolicy {
	var c GCPolicy
	if p != nil {
		c = *p
	}
	c = c.withDefaults()
	return &c
}

// Validate checks the policy: no negative counts or ages, and valid commit
// options for a repair.
func (p *GCPolicy) Validate() error {
	if p == nil {
		return nil
	}
	if p.KeepVersions < 0 || p.RetainFor < 0 || p.SafetyAge < 0 || p.ConsumerRetention < 0 {
		return fmt.Errorf("%w: GCPolicy: KeepVersions, RetainFor, SafetyAge and ConsumerRetention must not be negative", ErrInvalidOptions)
	}
	if err := p.Commit.Validate(); err != nil {
		return fmt.Errorf("compactor: GCPolicy.Commit: %w", err)
	}
	return nil
}

// EnsureDefaults returns a copy of o (nil: the zero Options) with every
// unset field at its default.
func (o *Options) EnsureDefaults() *Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Parallelism <= 0 {
		c.Parallelism = 64
	}
	if c.ReadAheadBytes <= 0 {
		c.ReadAheadBytes = 32 << 20
	}
	if c.MaxReplans <= 0 {
		c.MaxReplans = 5
	}
	if c.MemoryBudget <= 0 {
		c.MemoryBudget = DefaultMemoryBudget
	}
	if c.Holder == "" {
		c.Holder = DefaultHolder
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	return &c
}

// Validate checks the options: no negative bounds, a lease of at least
// MinLeaseTTL (it is renewed a third of the way through), a memory budget
// of at least MinMemoryBudget, and valid commit options.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	if o.Parallelism < 0 || o.ReadAheadBytes < 0 || o.MaxReplans < 0 || o.LeaseTTL < 0 {
		return fmt.Errorf("%w: Options: Parallelism, ReadAheadBytes, MaxReplans and LeaseTTL must not be negative", ErrInvalidOptions)
	}
	if o.LeaseTTL > 0 && o.LeaseTTL < MinLeaseTTL {
		return fmt.Errorf("%w: Options: LeaseTTL %v is below %v", ErrInvalidOptions, o.LeaseTTL, MinLeaseTTL)
	}
	if o.MemoryBudget < 0 || (o.MemoryBudget > 0 && o.MemoryBudget < MinMemoryBudget) {
		return fmt.Errorf("%w: Options: MemoryBudget %d is below %d (16 MiB)", ErrInvalidOptions, o.MemoryBudget, MinMemoryBudget)
	}
	if err := o.Commit.Validate(); err != nil {
		return fmt.Errorf("compactor: Options.Commit: %w", err)
	}
	return nil
}
