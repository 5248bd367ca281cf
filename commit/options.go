package commit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// Options tune the commit loop. The zero value (or nil) means defaults.
type Options struct {
	// Writer names the committer in the manifests it makes (a host or pod).
	Writer string
	// MaxAttempts bounds conditional creates per commit; 0 means 100.
	// Budget is the main bound: losing a race to another writer is normal
	// on a busy table, and each loss costs a few milliseconds.
	MaxAttempts int
	// MaxReplans bounds how often a Table operation that plans against a
	// version (Delete, CreateIndex, a Rewrite's caller) plans again after
	// a retryable conflict; 0 means 10. Each plan's commit has its own
	// MaxAttempts and Budget.
	MaxReplans int
	// Budget bounds a commit's wall time; 0 means 30s.
	Budget time.Duration
	// BaseBackoff and MaxBackoff bound the jittered exponential backoff
	// between attempts after a transient failure; 0 means 2ms and 100ms.
	// Losing a race is not a sign of overload (the loser already holds
	// the newest version), so a loser retries at once.
	BaseBackoff, MaxBackoff time.Duration
	// StallCheck: a commit that took longer than this from reading its base
	// version checks the GC boundary before reporting success; 0 means 30s.
	// The garbage collector never removes a manifest younger than 10× it.
	StallCheck time.Duration
	// Now is the clock (default time.Now); tests move it.
	Now func() time.Time
	// CatchUp makes the loop look for newer versions (one LIST) before its
	// first attempt, when the base it was given may be stale. Table sets
	// it for handles that share a table with other writers.
	CatchUp bool
	// KnownAt, without CatchUp: when the base handed in was last known to
	// be the newest version (its own commit landed then), on Now's clock.
	// The stall check counts from it; zero means from the base's
	// timestamp.
	KnownAt time.Time
	// ReadParallelism bounds the fragments an upsert or an update reads
	// at once to find its rows, and the deletion vectors it reads and
	// writes at once; 0 means 8. At 1 an
	// upsert also writes its rows before it looks for its keys, so that
	// its requests go one at a time.
	ReadParallelism int
	// SchemaWait is how long a schema change that takes values away (a
	// dropped column, a restore to a version without a column) waits
	// after its commit before it answers, when the table has shards: the
	// shards' writes begun after it have checked the schema after the
	// commit (see evolve.SchemaLease). 0 means SchemaLease plus
	// SchemaLeaseSlack, the one value safe with shards of other
	// processes; a shorter one is for tests whose shards take a shorter
	// lease.
	SchemaWait time.Duration
	// Sleep waits out a span of Now's time (SchemaWait), or until ctx
	// ends; nil means a timer. A clock that tests move is moved here too.
	Sleep func(ctx context.Context, d time.Duration) error
}

// ErrInvalidOptions: an option out of its range, or options that break a
// relation their documentation states (see Options.Validate).
var ErrInvalidOptions = errors.New("commit: invalid options")

// EnsureDefaults returns a copy of o (nil: the zero Options) with every
// unset field at its default. o itself is not changed.
func (o *Options) EnsureDefaults() *Options {
	c := o.withDefaults()
	return &c
}

// Validate checks the options as EnsureDefaults leaves them: no negative
// bounds, BaseBackoff at most MaxBackoff, and StallCheck at most a tenth of
// format.MinGCAge — the garbage collector never removes a manifest younger
// than MinGCAge, so a commit slower than StallCheck must check before that
// can happen. Every function taking *Options calls it.
func (o *Options) Validate() error {
	_, err := o.resolve()
	return err
}

// resolve is what every entry point does with its options: fill in the
// defaults, then check.
func (o *Options) resolve() (Options, error) {
	c := o.withDefaults()
	switch {
	case o != nil && (o.MaxAttempts < 0 || o.MaxReplans < 0 || o.Budget < 0 || o.BaseBackoff < 0 || o.MaxBackoff < 0 || o.StallCheck < 0 || o.ReadParallelism < 0 || o.SchemaWait < 0):
		return Options{}, fmt.Errorf("%w: MaxAttempts, MaxReplans, Budget, BaseBackoff, MaxBackoff, StallCheck, ReadParallelism and SchemaWait must not be negative", ErrInvalidOptions)
	case c.BaseBackoff > c.MaxBackoff:
		return Options{}, fmt.Errorf("%w: BaseBackoff %v is above MaxBackoff %v", ErrInvalidOptions, c.BaseBackoff, c.MaxBackoff)
	case c.StallCheck > format.MinGCAge/10:
		return Options{}, fmt.Errorf("%w: StallCheck %v is above %v, a tenth of the age below which garbage collection keeps every manifest", ErrInvalidOptions, c.StallCheck, format.MinGCAge/10)
	}
	return c, nil
}

func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 100
	}
	if c.MaxReplans <= 0 {
		c.MaxReplans = 10
	}
	if c.Budget <= 0 {
		c.Budget = 30 * time.Second
	}
	if c.BaseBackoff <= 0 {
		c.BaseBackoff = 2 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 100 * time.Millisecond
	}
	if c.StallCheck <= 0 {
		c.StallCheck = 30 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.SchemaWait <= 0 {
		c.SchemaWait = evolve.SchemaLease + evolve.SchemaLeaseSlack
	}
	return c
}
