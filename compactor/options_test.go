package compactor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stratadb/strata/compactor"
)

// The options idiom across the compactor: nil means defaults; Validate
// enforces the stated relations, and the entry points refuse what it
// refuses before touching the store.
func TestOptionsDefaultsAndValidate(t *testing.T) {
	var p *compactor.Policy
	if err := p.Validate(); err != nil || p.EnsureDefaults().MinFragments != 16 {
		t.Fatalf("nil policy: %v", err)
	}
	var g *compactor.GCPolicy
	if d := g.EnsureDefaults(); d.KeepVersions != 10 || d.RetainFor != time.Hour {
		t.Fatalf("nil GC policy: %+v", d)
	}
	if d := (&compactor.GCPolicy{RetainFor: time.Minute}).EnsureDefaults(); d.RetainFor != compactor.MinRetain {
		t.Fatalf("a retention below the floor is raised: %v", d.RetainFor)
	}
	b := rolloutsTable(t, "mem://", 0, 2, 10)
	for _, bad := range []struct {
		what string
		run  func() error
	}{
		{"outputs as small as their sources", func() error {
			_, err := compactor.Compact(ctx, b, &compactor.Policy{TargetRows: 100, SmallRows: 1000}, nil)
			return err
		}},
		{"a deleted fraction over 1", func() error {
			_, err := compactor.Compact(ctx, b, &compactor.Policy{DeletedFraction: 2}, nil)
			return err
		}},
		{"a lease too short to renew", func() error {
			_, err := compactor.Compact(ctx, b, nil, &compactor.Options{LeaseTTL: time.Second})
			return err
		}},
		{"a negative retention", func() error {
			_, err := compactor.GC(ctx, b, &compactor.GCPolicy{RetainFor: -time.Hour}, time.Now())
			return err
		}},
	} {
		if err := bad.run(); !errors.Is(err, compactor.ErrInvalidOptions) {
			t.Errorf("%s: %v, want ErrInvalidOptions", bad.what, err)
		}
	}
}
