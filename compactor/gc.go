package compactor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/internal/plant"
	"github.com/stratadb/strata/table"
)

// GCPolicy says what garbage collection may delete. Zero values mean
// defaults.
type GCPolicy struct {
	// KeepVersions: the newest versions always kept (default 10).
	KeepVersions int
	// RetainFor: versions younger than this are kept (default 1h; never
	// less than MinRetain).
	RetainFor time.Duration
	// SafetyAge: objects no kept version references are deleted only once
	// older than this, since an upload may be on its way to a commit
	// (default 1h; never less than MinRetain).
	SafetyAge time.Duration
	// DryRun lists what would go and deletes nothing.
	DryRun bool
	// Commit tunes the commits of a repair (see Repair).
	Commit commit.Options
}

// MinRetain is the floor for RetainFor and SafetyAge: ten times the commit
// loop's default stall threshold, so that a commit slower than that checks
// the GC boundary before it reports success (see docs/format.md).
const MinRetain = table.MinGCAge

func (p GCPolicy) withDefaults() GCPolicy {
	if p.KeepVersions <= 0 {
		p.KeepVersions = 10
	}
	if p.RetainFor == 0 {
		p.RetainFor = time.Hour
	}
	if p.SafetyAge == 0 {
		p.SafetyAge = time.Hour
	}
	p.RetainFor = max(p.RetainFor, MinRetain)
	p.SafetyAge = max(p.SafetyAge, MinRetain)
	return p
}

// GCResult says what a collection deleted (or, in a dry run, would).
type GCResult struct {
	Boundary        uint64   // versions at or below it may be gone
	VersionsKept    int      // manifests kept
	VersionsDeleted []uint64 // manifests deleted
	ObjectsDeleted  []string // data, deletion vectors, key indexes, merged generations
	BytesFreed      int64
	// Repaired: versions whose commits were undone because the data they
	// added was gone (see Repair); such a run deletes nothing more.
	Repaired []uint64
	// GhostsDeleted: collected versions a stalled writer created again
	// and died before taking away (created after a newer version).
	GhostsDeleted []uint64
}

// GC deletes versions older than the policy allows (keeping the newest
// KeepVersions, those younger than RetainFor, and every tagged version),
// then the data objects that no kept version references and that are older
// than SafetyAge. It creates the GC boundary before it lists the tags and
// deletes any manifest, so that a writer stalled across the collection
// cannot bring a deleted version back, and a tag created meanwhile is
// either seen or refused (see table.CreateTag). It reads the manifests it
// keeps (to know what they reference), never those it deletes. Before
// deleting anything it repairs a newest version whose data is gone
// (Repair), and then stops.
func GC(ctx context.Context, b blob.Bucket, policy *GCPolicy, now time.Time) (GCResult, error) {
	var res GCResult
	if err := policy.Validate(); err != nil {
		return res, err
	}
	p := *policy.EnsureDefaults()
	type ver struct {
		v   uint64
		mod time.Time
	}
	var versions []ver // newest first
	for o, err := range blob.List(ctx, b, table.VersionsDir, 0) {
		if err != nil {
			return res, err
		}
		if v, ok := table.ParseManifestKey(o.Key); ok {
			versions = append(versions, ver{v, o.ModTime})
		}
	}
	if len(versions) == 0 {
		return res, table.ErrNotFound
	}
	// Versions the listing does not show yet (on a store whose listings
	// lag behind creates) reference data too: look for them by name, one
	// request that finds nothing in the usual case.
	for {
		next := versions[0].v + 1
		a, err := b.Attributes(ctx, table.ManifestKey(next))
		if errors.Is(err, blob.ErrNotFound) {
			break
		}
		if err != nil {
			return res, err
		}
		versions = append([]ver{{next, a.ModTime}}, versions...)
	}
	// Ghosts: a version created after a newer one cannot have been built
	// upon (each version is created by a writer that read the one before);
	// it is a collected version a stalled writer created again and, having
	// died, did not take away. Nothing reaches it: it goes.
	var real []ver
	oldestNewer := time.Time{}
	for _, v := range versions {
		if !oldestNewer.IsZero() && v.mod.After(oldestNewer) {
			res.GhostsDeleted = append(res.GhostsDeleted, v.v)
			continue
		}
		real = append(real, v)
		if oldestNewer.IsZero() || v.mod.Before(oldestNewer) {
			oldestNewer = v.mod
		}
	}
	versions = real
	if !p.DryRun {
		for _, v := range res.GhostsDeleted {
			if err := b.Delete(ctx, table.ManifestKey(v)); err != nil && !errors.Is(err, blob.ErrNotFound) {
				return res, err
			}
		}
	}
	// The boundary: the newest version that is neither among the newest
	// KeepVersions nor younger than RetainFor. Everything at or below it,
	// but tagged versions, goes.
	for i, v := range versions {
		if i >= p.KeepVersions && now.Sub(v.mod) >= p.RetainFor {
			res.Boundary = v.v
			break
		}
	}
	// The boundary goes in before the tags are listed: a tag created
	// after the listing then sees the boundary and gives up (CreateTag),
	// and one created before it is in the listing.
	if !p.DryRun && res.Boundary > 0 {
		if err := b.PutIfAbsent(ctx, table.GCBoundaryKey(res.Boundary), nil); err != nil && !errors.Is(err, blob.ErrExists) {
			return res, fmt.Errorf("compactor: gc: creating the boundary: %w", err)
		}
	}
	tags, err := table.Tags(ctx, b)
	if err != nil {
		return res, err
	}
	tagged := map[uint64]bool{}
	for _, t := range tags {
		tagged[t.Version] = true
	}
	var keep []uint64
	for _, v := range versions {
		if v.v > res.Boundary || tagged[v.v] {
			keep = append(keep, v.v)
		} else {
			res.VersionsDeleted = append(res.VersionsDeleted, v.v)
		}
	}
	res.VersionsKept = len(keep)
	newest := versions[0].v
	referenced := map[string]bool{}
	var latest *table.Manifest
	for _, v := range keep {
		m, err := table.ReadManifest(ctx, b, v)
		if err != nil {
			return res, fmt.Errorf("compactor: gc: reading kept version %d: %w", v, err)
		}
		if latest == nil {
			latest = m
		}
		for _, f := range m.Fragments {
			referenced[f.Key] = true
			if f.Deletion != nil {
				referenced[f.Deletion.Key] = true
			}
		}
		for _, ix := range m.Indexes {
			referenced[ix.Key] = true
		}
	}
	// The objects that may go, listed before anything is deleted.
	var listed []blob.ObjectInfo
	present := map[string]bool{}
	for _, prefix := range []string{table.DataDir, table.DeletionsDir, table.IndicesDir, table.ShardsDir} {
		for o, err := range blob.List(ctx, b, prefix, 0) {
			if err != nil {
				return res, err
			}
			listed = append(listed, o)
			present[o.Key] = true
		}
	}
	// The newest version must be whole before anything goes: if a writer
	// died after committing data that an earlier collection took during
	// its stall, its commit is undone first (a compaction's sources come
	// back), and this collection deletes nothing more.
	if !p.DryRun {
		rep, err := Repair(ctx, b, &p.Commit, func(key string) bool { return present[key] })
		res.Repaired = rep.Undone
		if err != nil || len(rep.Undone) > 0 {
			return res, err
		}
	}
	// Oldest first: a collection cut short leaves the versions it did not
	// reach without a gap below the newest, so a writer that reads an old
	// version as the latest (through a listing that lags) finds the next
	// one taken, never a collected slot it could fill with a ghost.
	slices.Sort(res.VersionsDeleted)
	if !p.DryRun {
		for _, v := range res.VersionsDeleted {
			if err := b.Delete(ctx, table.ManifestKey(v)); err != nil && !errors.Is(err, blob.ErrNotFound) {
				return res, err
			}
		}
	}
	// Shard generations: only those the table has merged (at or below the
	// shard's watermark); newer ones await their merge. Shard objects
	// other than generations stay.
	eligible := func(key string) bool {
		if !strings.HasPrefix(key, table.ShardsDir) {
			return true // data, deletion vectors and key indexes
		}
		shard, gen, ok := table.ParseGenerationKey(key)
		return ok && gen <= latest.Shards[shard].Watermark
	}
	// Unreferenced objects, old enough.
	var doomed []blob.ObjectInfo
	for _, o := range listed {
		if referenced[o.Key] || (now.Sub(o.ModTime) < p.SafetyAge && !plant.On(plant.GCWithoutSafetyAge)) || !eligible(o.Key) {
			continue
		}
		doomed = append(doomed, o)
	}
	if !p.DryRun && len(doomed) > 0 {
		// The orphan record goes in before looking for versions created
		// since the listing (see table.OrphanRecord): a commit that lands
		// after it sees it and is not acknowledged; one that landed before
		// is found here and its objects spared.
		keys := make([]string, len(doomed))
		for i, o := range doomed {
			keys[i] = o.Key
		}
		if err := table.WriteOrphanRecord(ctx, b, keys, now); err != nil {
			return res, fmt.Errorf("compactor: gc: recording the objects it deletes: %w", err)
		}
		spared, err := referencedSince(ctx, b, newest)
		if err != nil {
			return res, err
		}
		doomed = slices.DeleteFunc(doomed, func(o blob.ObjectInfo) bool { return spared[o.Key] })
	}
	for _, o := range doomed {
		res.ObjectsDeleted = append(res.ObjectsDeleted, o.Key)
		res.BytesFreed += o.Size
		if !p.DryRun {
			if err := b.Delete(ctx, o.Key); err != nil && !errors.Is(err, blob.ErrNotFound) {
				return res, err
			}
		}
	}
	if !p.DryRun {
		if err := pruneOrphanRecords(ctx, b, now); err != nil {
			return res, err
		}
	}
	return res, nil
}

// OrphanRecordAge: orphan records are kept this long. A repair needs the
// record that proves a commit was never acknowledged; without it, missing
// data is reported instead of undone.
const OrphanRecordAge = 7 * 24 * time.Hour

// referencedSince reads the versions created after newest, by name (a
// listing may lag), and returns the objects they reference.
func referencedSince(ctx context.Context, b blob.Bucket, newest uint64) (map[string]bool, error) {
	out := map[string]bool{}
	for v := newest + 1; ; v++ {
		m, err := table.ReadManifest(ctx, b, v)
		if errors.Is(err, table.ErrVersionNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("compactor: gc: reading v%d, created during the collection: %w", v, err)
		}
		for _, f := range m.Fragments {
			out[f.Key] = true
			if f.Deletion != nil {
				out[f.Deletion.Key] = true
			}
		}
		for _, ix := range m.Indexes {
			out[ix.Key] = true
		}
	}
}

func pruneOrphanRecords(ctx context.Context, b blob.Bucket, now time.Time) error {
	for o, err := range blob.List(ctx, b, table.OrphansDir, 0) {
		if err != nil {
			return err
		}
		if now.Sub(o.ModTime) < OrphanRecordAge {
			continue
		}
		if err := b.Delete(ctx, o.Key); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return err
		}
	}
	return nil
}
