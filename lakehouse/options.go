package lakehouse

import (
	"fmt"
	"time"

	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table/format"
)

// Options tune an export. A nil *Options means the defaults, which are
// garbage collection's (compactor.GCPolicy): keep them equal to the
// collection's policy so that the view describes what it keeps.
type Options struct {
	// Location is the table's address as Iceberg readers resolve it
	// (LocationOf): s3://bucket/prefix, gs://bucket/prefix, file:///path.
	// Required.
	Location string
	// Version is the newest version described, the main branch (0: the
	// latest).
	Version uint64
	// KeepVersions: the newest versions always described (default 10).
	KeepVersions int
	// RetainFor: versions younger than this are described (default 1h).
	RetainFor time.Duration
	// MaxManifests: when a snapshot would list more data (or delete)
	// manifests than this, they are merged into one (default 64).
	MaxManifests int
	// OnProgress, when set, is told after each version described: how
	// many of the versions this export adds are done.
	OnProgress func(done, total int64)
}

// EnsureDefaults returns a copy with every zero field set to its default.
func (o *Options) EnsureDefaults() *Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.KeepVersions == 0 {
		c.KeepVersions = format.DefaultKeepVersions
	}
	if c.RetainFor == 0 {
		c.RetainFor = format.DefaultRetention
	}
	if c.MaxManifests == 0 {
		c.MaxManifests = 64
	}
	return &c
}

// Validate checks the options once defaults are applied.
func (o *Options) Validate() error {
	c := o.EnsureDefaults()
	switch {
	case c.Location == "":
		return fmt.Errorf("%w: Location is required (see LocationOf)", layout.ErrInvalidOptions)
	case layout.CheckLocation(c.Location) != "":
		return fmt.Errorf("%w: Location %q %s", layout.ErrInvalidOptions, c.Location, layout.CheckLocation(c.Location))
	case c.KeepVersions < 1:
		return fmt.Errorf("%w: KeepVersions %d is below 1", layout.ErrInvalidOptions, c.KeepVersions)
	case c.RetainFor < 0:
		return fmt.Errorf("%w: RetainFor %v is negative", layout.ErrInvalidOptions, c.RetainFor)
	case c.MaxManifests < 2:
		return fmt.Errorf("%w: MaxManifests %d is below 2", layout.ErrInvalidOptions, c.MaxManifests)
	}
	return nil
}
