package compactor

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// gcGhosts splits versions (newest first) into ghosts and the rest. A
// ghost is a version a collection deleted (at or below collected, the
// newest boundary of a collection) that a writer stalled since then
// created again: its manifest was written after a newer version's. The
// manifests of a table copied by a tool that does not keep modification
// times (cp, a sync to another bucket) may look written out of order too;
// with no collection's boundary above them they are no ghosts, and stay;
// nor is a tagged version one (a collection keeps those, and no tag is
// made at or below a boundary).
func gcGhosts(versions []VersionAge, collected uint64, tags []table.Tag) (ghosts []uint64, real []VersionAge) {
	oldestNewer := time.Time{}
	for _, v := range versions {
		tagged := slices.ContainsFunc(tags, func(t table.Tag) bool { return t.Version == v.Version })
		if !oldestNewer.IsZero() && v.Written.After(oldestNewer) && v.Version <= collected && !tagged {
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

// readVersions lists the versions (listVersions), and what tells a ghost
// among them (ghostCheck).
func readVersions(ctx context.Context, b blob.Bucket) (versions []VersionAge, collected uint64, tags []table.Tag, err error) {
	if versions, err = listVersions(ctx, b); err != nil {
		return nil, 0, nil, err
	}
	collected, tags, err = ghostCheck(ctx, b, versions)
	return versions, collected, tags, err
}

// ghostCheck reads what tells a ghost when some of versions looks like
// one: the newest boundary of an earlier collection (one LIST of one
// key) and the tags; else nothing, so that a collection of a table with
// no such version costs no request more.
func ghostCheck(ctx context.Context, b blob.Bucket, versions []VersionAge) (collected uint64, tags []table.Tag, err error) {
	if ghosts, _ := gcGhosts(versions, math.MaxUint64, nil); len(ghosts) == 0 {
		return 0, nil, nil
	}
	if collected, err = table.GCBoundary(ctx, b); err != nil {
		return 0, nil, err
	}
	tags, err = table.Tags(ctx, b)
	return collected, tags, err
}

// readNewest reads the newest of real first, before anything is deleted
// or written: a newer build's table (which may reference objects unknown
// here) is left as it is.
func readNewest(ctx context.Context, b blob.Bucket, real []VersionAge) (map[uint64]*format.Manifest, error) {
	out := map[uint64]*format.Manifest{}
	if len(real) == 0 {
		return out, nil
	}
	m, err := table.ReadManifest(ctx, b, real[0].Version)
	if err != nil {
		return nil, fmt.Errorf("compactor: gc: reading the newest version: %w", err)
	}
	if err := m.CheckWritable(); err != nil {
		return nil, fmt.Errorf("compactor: gc: %w", err)
	}
	out[real[0].Version] = m
	return out, nil
}
