package walshard_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
	"github.com/stratadb/strata/walshard/wal"
)

// The options idiom: EnsureDefaults fills a copy; Validate refuses what is
// out of range, including bad commit options, and Open refuses them too.
func TestOptionsDefaultsAndValidate(t *testing.T) {
	given := &walshard.Options{Shard: "w1"}
	o := given.EnsureDefaults()
	if o.GroupBytes != 8<<20 || o.MaxMemtableBytes != 256<<20 || o.Commit.Writer != "shard:w1" || given.GroupBytes != 0 {
		t.Fatalf("defaults %+v from %+v", o, given)
	}
	var none *walshard.Options
	if err := none.Validate(); !errors.Is(err, wal.ErrBadShardID) {
		t.Fatalf("nil options (no shard id): %v", err)
	}
	for _, bad := range []walshard.Options{
		{Shard: "w1", FlushBytes: -1},
		{Shard: "w1", Commit: commit.Options{StallCheck: format.MinGCAge}},
		{Shard: "w1", GroupWait: -time.Second},
	} {
		if err := bad.Validate(); !errors.Is(err, wal.ErrInvalidOptions) && !errors.Is(err, commit.ErrInvalidOptions) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	var fo *fleetmerge.Options
	if err := fo.Validate(); err != nil || fo.EnsureDefaults().Parallelism != 32 {
		t.Fatalf("nil fleet options: %v", err)
	}
	if err := (&fleetmerge.Options{Parallelism: -2}).Validate(); !errors.Is(err, wal.ErrInvalidOptions) {
		t.Fatalf("negative parallelism: %v", err)
	}
}
