package commit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table/format"
)

// The options idiom: nil and the zero value mean the defaults, which are
// valid; EnsureDefaults fills a copy; Validate enforces the relations the
// docs state, and every entry point refuses options that break them.
func TestOptionsDefaultsAndValidate(t *testing.T) {
	var nilOpts *commit.Options
	if err := nilOpts.Validate(); err != nil {
		t.Fatalf("nil options: %v", err)
	}
	given := &commit.Options{Writer: "w"}
	o := given.EnsureDefaults()
	if o.MaxAttempts != 100 || o.MaxReplans != 10 || o.StallCheck != 30*time.Second || o.Now == nil || o.Writer != "w" {
		t.Fatalf("defaults: %+v", o)
	}
	if given.MaxAttempts != 0 {
		t.Fatal("EnsureDefaults changed its receiver")
	}
	for _, bad := range []commit.Options{
		{StallCheck: format.MinGCAge / 5},
		{BaseBackoff: time.Second, MaxBackoff: time.Millisecond},
		{MaxAttempts: -1},
	} {
		if err := bad.Validate(); !errors.Is(err, commit.ErrInvalidOptions) {
			t.Errorf("%+v: %v, want ErrInvalidOptions", bad, err)
		}
		if _, err := commit.OpenTable(ctx, open(t, "mem://"), &bad); !errors.Is(err, commit.ErrInvalidOptions) {
			t.Errorf("OpenTable with %+v: %v", bad, err)
		}
	}
}
