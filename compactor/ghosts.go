package compactor

import (
	"context"
	"math"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
)

// gcGhosts splits versions (newest first) into ghosts and the rest. A
// ghost is a version a collection deleted (at or below collected, the
// newest boundary of a collection) that a writer stalled since then
// created again: its manifest was written after a newer version's. The
// manifests of a table copied by a tool that does not keep modification
// times (cp, a sync to another bucket) may look written out of order too;
// with no collection's boundary above them they are no ghosts, and stay.
func gcGhosts(versions []VersionAge, collected uint64) (ghosts []uint64, real []VersionAge) {
	oldestNewer := time.Time{}
	for _, v := range versions {
		if !oldestNewer.IsZero() && v.Written.After(oldestNewer) && v.Version <= collected {
			ghosts = append(ghosts, v.Version)
			continue
		}
		real = append(real, v)
		if oldestNewer.IsZero() || v.Written.Before(oldestNewer) {
			oldestNewer = v.Written
		}
	}
	return ghosts, real
}

// collectedBelow is the newest boundary of an earlier collection when
// some of versions looks like a ghost (one LIST of one key), else 0: a
// collection of a table with none costs no request more.
func collectedBelow(ctx context.Context, b blob.Bucket, versions []VersionAge) (uint64, error) {
	if ghosts, _ := gcGhosts(versions, math.MaxUint64); len(ghosts) == 0 {
		return 0, nil
	}
	return table.GCBoundary(ctx, b)
}
