package compactor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/internal/plant"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
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
	// ConsumerRetention: the versions a named consumer (table.Consumer)
	// has not read yet are kept while younger than this (default
	// table.DefaultConsumerRetention, 7 days); older ones go as the rest
	// of the policy says, and the consumer is told (its changes are a
	// format.ChangesCollectedError naming the oldest version left).
	ConsumerRetention time.Duration
	// RetireShardsAfter: a shard that holds no row outside the table and
	// whose every object is older than this is retired: its objects and
	// fleet hints are deleted (see retire.go; default
	// DefaultRetireShardsAfter, 24h; never less than
	// MinRetireShardsAfter, 12h; negative: never).
	RetireShardsAfter time.Duration
	// DryRun lists what would go and deletes nothing.
	DryRun bool
	// Commit tunes the commits of a repair (see Repair).
	Commit commit.Options
}

// MinRetain is the floor for RetainFor and SafetyAge: ten times the commit
// loop's default stall threshold, so that a commit slower than that checks
// the GC boundary before it reports success (see docs/format.md).
const MinRetain = format.MinGCAge

func (p GCPolicy) withDefaults() GCPolicy {
	if p.KeepVersions <= 0 {
		p.KeepVersions = format.DefaultKeepVersions
	}
	if p.RetainFor == 0 {
		p.RetainFor = format.DefaultRetention
	}
	if p.SafetyAge == 0 {
		p.SafetyAge = time.Hour
	}
	if p.ConsumerRetention == 0 {
		p.ConsumerRetention = table.DefaultConsumerRetention
	}
	if p.RetireShardsAfter == 0 {
		p.RetireShardsAfter = DefaultRetireShardsAfter
	}
	if p.RetireShardsAfter > 0 {
		p.RetireShardsAfter = max(p.RetireShardsAfter, MinRetireShardsAfter)
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
	// ShardsRetired: shards whose objects the collection deleted (see
	// GCPolicy.RetireShardsAfter).
	ShardsRetired []string
	// Plan is what the collection decided (see PlanGC); a dry run stops
	// there.
	Plan GCPlan
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
	// Read the versions; ghosts and the boundary follow from them alone.
	var st GCState
	var err error
	if st.Versions, st.Collected, st.Tags, err = readVersions(ctx, b); err != nil {
		return res, err
	}
	// The consumers before the boundary, which they hold back (a group
	// as a consumer at its slowest position): one that moves back or
	// appears after this reading finds its versions gone (a
	// ChangesCollectedError), never a gap.
	if st.Consumers, err = table.ConsumersAndGroups(ctx, b); err != nil {
		return res, err
	}
	ghosts, real := gcGhosts(st.Versions, st.Collected, st.Tags)
	res.GhostsDeleted = ghosts
	res.Boundary = gcBoundary(real, st.Consumers, p, now)
	if st.Manifests, err = readNewest(ctx, b, real); err != nil {
		return res, err
	}
	if !p.DryRun {
		for _, v := range ghosts {
			if err := b.Delete(ctx, format.ManifestKey(v)); err != nil && !errors.Is(err, blob.ErrNotFound) {
				return res, err
			}
		}
		// The boundary goes in before the tags are listed: a tag created
		// after the listing then sees the boundary and gives up
		// (CreateTag), and one created before it is in the listing.
		if res.Boundary > 0 {
			if err := b.PutIfAbsent(ctx, format.GCBoundaryKey(res.Boundary), nil); err != nil && !errors.Is(err, blob.ErrExists) {
				return res, fmt.Errorf("compactor: gc: creating the boundary: %w", err)
			}
		}
	}
	// Then what decides the rest: tags, the kept versions' manifests, and
	// the objects that may go (listed before anything is deleted).
	if st.Tags, err = table.Tags(ctx, b); err != nil {
		return res, err
	}
	// The Iceberg view, read after the boundary went in, as the tags are:
	// an export that lands later sees the boundary and drops what it
	// covers (see lakehouse.Export).
	if st.Iceberg, err = readIcebergRefs(ctx, b, &st.Objects); err != nil {
		return res, err
	}
	for _, v := range gcKeep(real, res.Boundary, st.Tags, st.Iceberg.Versions) {
		if st.Manifests[v] != nil {
			continue
		}
		m, err := table.ReadManifest(ctx, b, v)
		if err != nil {
			return res, fmt.Errorf("compactor: gc: reading kept version %d: %w", v, err)
		}
		if err := m.CheckWritable(); err != nil { // it may hold objects unknown here
			return res, fmt.Errorf("compactor: gc: %w", err)
		}
		st.Manifests[v] = m
	}
	var shards []blob.ObjectInfo
	for _, prefix := range []string{format.DataDir, format.DeletionsDir, format.IndicesDir, format.ShardsDir, format.FleetFlushDir} {
		for o, err := range blob.List(ctx, b, prefix, 0) {
			if err != nil {
				return res, err
			}
			// Flush objects are a shard's states: they tell how lately it
			// wrote, and go only with a retired shard (fleetHints); fleet
			// merges delete those merged.
			if prefix != format.FleetFlushDir {
				st.Objects = append(st.Objects, o)
			}
			if prefix == format.ShardsDir || prefix == format.FleetFlushDir {
				shards = append(shards, o)
			}
		}
	}
	if st.Retired, err = retirable(ctx, b, shards, st.Manifests, p, now); err != nil {
		return res, err
	}
	hints, err := fleetHints(ctx, b, st.Retired)
	if err != nil {
		return res, err
	}
	st.Objects = append(st.Objects, hints...)
	plan := PlanGC(st, p, now)
	res.Plan, res.VersionsKept, res.VersionsDeleted, res.ShardsRetired = plan, len(plan.Kept), plan.Versions, plan.Retired // (those fenced, once deleting)
	if p.DryRun {
		for _, o := range plan.Objects {
			res.ObjectsDeleted = append(res.ObjectsDeleted, o.Key)
			res.BytesFreed += o.Size
		}
		return res, nil
	}
	return applyGC(ctx, b, st, plan, p, now, res)
}

// VersionAge is a version and when its manifest was written.
type VersionAge struct {
	Version uint64
	Written time.Time
}

// GCState is what a collection reads of a table before it decides.
type GCState struct {
	Versions  []VersionAge                // newest first, from the listing and by name after it
	Collected uint64                      // the newest boundary of an earlier collection, when some version may be a ghost (see gcGhosts)
	Tags      []table.Tag                 // every tag
	Manifests map[uint64]*format.Manifest // the versions kept (see PlanGC)
	Objects   []blob.ObjectInfo           // data, deletion vectors, key indexes, shard objects and the Iceberg view's
	Iceberg   layout.Refs                 // what the table's Iceberg view holds on to (layout.ReadRefs)
	Consumers []table.Consumer            // the named consumers' positions and the groups' slowest, read before the boundary
	Retired   []string                    // shards to retire (their objects and fleet hints among Objects)
}

// GCPlan is what a collection deletes, decided from a GCState alone.
type GCPlan struct {
	Ghosts   []uint64          // versions created again after a newer one (nothing reaches them)
	Boundary uint64            // versions at or below it go, but tagged ones
	Kept     []uint64          // versions kept, newest first
	Versions []uint64          // versions deleted, oldest first
	Objects  []blob.ObjectInfo // objects no kept version references, old enough, and eligible
	Retired  []string          // shards retired: their objects among Objects, epoch claims last
}

// String prints the plan: what `strata gc --dry-run` shows.
func (p GCPlan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "boundary v%d: keep %d versions, delete %d versions %v", p.Boundary, len(p.Kept), len(p.Versions), p.Versions)
	if len(p.Ghosts) > 0 {
		fmt.Fprintf(&b, " and ghosts %v", p.Ghosts)
	}
	var bytes int64
	for _, o := range p.Objects {
		bytes += o.Size
	}
	fmt.Fprintf(&b, "; delete %d objects (%d bytes)\n", len(p.Objects), bytes)
	for _, o := range p.Objects {
		fmt.Fprintf(&b, "  %s\t%d bytes\t%s\n", o.Key, o.Size, o.ModTime.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// StoreClock returns now, or the store's clock when it is behind now: the
// time to hand GC. A collection judges ages by the modification times the
// store gives its objects; measured with a clock that runs ahead of the
// store's, a fresh upload on its way to a commit would look older than the
// safety age, and its commit would land referencing an object already
// deleted. The store's clock is read from an empty object written for it
// under format.GCClockDir (then deleted: three requests), and only ever
// makes ages smaller (S3 gives an object's time in whole seconds, so by up
// to a second more). The compactor Job and strata gc call it before each
// collection.
func StoreClock(ctx context.Context, b blob.Bucket, now time.Time) (time.Time, error) {
	key := format.GCClockDir + format.NewID()
	if err := b.PutIfAbsent(ctx, key, nil); err != nil {
		return now, err
	}
	a, err := b.Attributes(ctx, key)
	if err != nil {
		return now, err
	}
	if err := b.Delete(ctx, key); err != nil && !errors.Is(err, blob.ErrNotFound) {
		return now, err
	}
	if a.ModTime.IsZero() || !a.ModTime.Before(now) {
		return now, nil
	}
	return a.ModTime, nil
}

// PlanGC decides what a collection deletes, from what it read and the
// clock alone (no requests; the same inputs give the same plan):
//
//   - ghosts: a version created after a newer one cannot have been built
//     upon (each version's writer read the one before); it is a collected
//     version a stalled writer created again and, having died, did not
//     take away;
//   - the boundary: the newest version neither among the newest
//     KeepVersions nor younger than RetainFor (each raised to its floor,
//     MinRetain); every version at or below it goes but tagged ones;
//   - objects: those no kept version references, older than SafetyAge,
//     and eligible — data, deletion vectors, key indexes, and shard
//     generations and WAL entries at or below their shard's watermark in
//     the newest version (newer ones await their merge; a WAL entry that
//     a merge added as a fragment stays while a kept version references
//     it; other shard objects stay).
func PlanGC(st GCState, policy GCPolicy, now time.Time) GCPlan {
	p := policy.withDefaults()
	var plan GCPlan
	var real []VersionAge
	plan.Ghosts, real = gcGhosts(st.Versions, st.Collected, st.Tags)
	if len(real) == 0 {
		return plan
	}
	plan.Boundary = gcBoundary(real, st.Consumers, p, now)
	plan.Kept = gcKeep(real, plan.Boundary, st.Tags, st.Iceberg.Versions)
	for _, v := range real {
		if !slices.Contains(plan.Kept, v.Version) {
			plan.Versions = append(plan.Versions, v.Version)
		}
	}
	// Oldest first: a collection cut short leaves the versions it did not
	// reach without a gap below the newest, so a writer that reads an old
	// version as the latest (through a listing that lags) finds the next
	// one taken, never a collected slot it could fill with a ghost.
	slices.Sort(plan.Versions)
	// The kept versions' objects, and the Iceberg view's: its own (Keys)
	// and the position-delete file of each kept deletion vector.
	referenced := maps.Clone(st.Iceberg.Keys)
	if referenced == nil {
		referenced = map[string]bool{}
	}
	for _, v := range plan.Kept {
		for k := range referencedBy(st.Manifests[v]) {
			referenced[k] = true
			if strings.HasPrefix(k, format.DeletionsDir) {
				referenced[layout.DeleteFileKey(k)] = true
			}
		}
	}
	newest := st.Manifests[plan.Kept[0]]
	eligible := func(key string) bool {
		if !strings.HasPrefix(key, format.ShardsDir) {
			return true // data, deletion vectors, key indexes, the Iceberg view's objects, retired shards' fleet hints
		}
		if s, ok := shardOf(key); ok && slices.Contains(st.Retired, s) {
			return true
		}
		shard, gen, ok := format.ParseGenerationKey(key)
		return ok && newest != nil && gen <= newest.Shards[shard].Watermark
	}
	for _, o := range st.Objects {
		young := now.Sub(o.ModTime) < p.SafetyAge && !strings.HasPrefix(o.Key, format.FleetDir) // (a retired shard's hints: no upload makes them)
		if referenced[o.Key] || (young && !plant.On(plant.GCWithoutSafetyAge)) || !eligible(o.Key) {
			continue
		}
		plan.Objects = append(plan.Objects, o)
	}
	plan.Retired = st.Retired
	retiredLast(plan.Objects, plan.Retired)
	return plan
}

// applyGC carries a plan out, in the order that keeps every reader and
// writer safe: repair first, then versions, then the orphan record, then
// the objects no version created meanwhile references.
func applyGC(ctx context.Context, b blob.Bucket, st GCState, plan GCPlan, p GCPolicy, now time.Time, res GCResult) (GCResult, error) {
	if len(plan.Kept) == 0 {
		return res, fmt.Errorf("compactor: gc: the plan keeps no version: %w", format.ErrNotFound)
	}
	present := map[string]bool{}
	for _, o := range st.Objects {
		present[o.Key] = true
	}
	// The newest version must be whole before anything goes: if a writer
	// died after committing data that an earlier collection took during
	// its stall, its commit is undone first (a compaction's sources come
	// back), and this collection deletes nothing more.
	rep, err := Repair(ctx, b, &p.Commit, func(key string) bool { return present[key] })
	res.Repaired = rep.Undone
	if err != nil || len(rep.Undone) > 0 {
		return res, err
	}
	for _, v := range plan.Versions {
		if err := b.Delete(ctx, format.ManifestKey(v)); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return res, err
		}
	}
	// Retired shards are fenced first, by a claim of the collector's own:
	// an owner that wakes while the retirement runs, or after it was cut
	// short, meets a newer claim before it writes (see retire.go).
	fenced, claims, err := fenceRetired(ctx, b, plan.Retired, st.Objects, st.Manifests[plan.Kept[0]])
	if err != nil {
		return res, err
	}
	doomed := slices.DeleteFunc(slices.Clone(plan.Objects), func(o blob.ObjectInfo) bool {
		return retiredShard(o.Key, plan.Retired) && !retiredShard(o.Key, fenced)
	})
	if len(doomed) > 0 {
		// The orphan record goes in before looking for versions created
		// since the listing (see format.OrphanRecord): a commit that lands
		// after it sees it and is not acknowledged; one that landed before
		// is found here and its objects spared.
		keys := make([]string, len(doomed))
		for i, o := range doomed {
			keys[i] = o.Key
		}
		if err := format.WriteOrphanRecord(ctx, b, keys, now); err != nil {
			return res, fmt.Errorf("compactor: gc: recording the objects it deletes: %w", err)
		}
		spared, err := referencedSince(ctx, b, plan.Kept[0])
		if err != nil {
			return res, err
		}
		doomed = slices.DeleteFunc(slices.Clone(doomed), func(o blob.ObjectInfo) bool { return spared[o.Key] })
	}
	if err := deleteDoomed(ctx, b, doomed, plan.Retired, &res); err != nil {
		return res, err
	}
	for _, k := range claims { // the collector's own claims, last of all
		if err := b.Delete(ctx, k); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return res, err
		}
	}
	res.ShardsRetired = fenced
	if err := reregister(ctx, b, fenced); err != nil {
		return res, err
	}
	if err := pruneOrphanRecords(ctx, b, now); err != nil {
		return res, err
	}
	return res, nil
}

// readIcebergRefs lists the Iceberg view's objects into objects and, when
// there are any, reads what its newest metadata holds on to: one LIST for
// a table without a view.
func readIcebergRefs(ctx context.Context, b blob.Bucket, objects *[]blob.ObjectInfo) (layout.Refs, error) {
	n := len(*objects)
	for o, err := range blob.List(ctx, b, format.IcebergDir, 0) {
		if err != nil {
			return layout.Refs{}, err
		}
		*objects = append(*objects, o)
	}
	if len(*objects) == n {
		return layout.Refs{}, nil
	}
	refs, err := layout.ReadRefs(ctx, b)
	if err != nil {
		return refs, fmt.Errorf("compactor: gc: reading the Iceberg view: %w", err)
	}
	return refs, nil
}

// listVersions lists the versions, newest first, and looks by name for
// those a lagging listing does not show yet (they reference data too):
// one request that finds nothing in the usual case.
func listVersions(ctx context.Context, b blob.Bucket) ([]VersionAge, error) {
	var versions []VersionAge
	for o, err := range blob.List(ctx, b, format.VersionsDir, 0) {
		if err != nil {
			return nil, err
		}
		if v, ok := format.ParseManifestKey(o.Key); ok {
			versions = append(versions, VersionAge{v, o.ModTime})
		}
	}
	if len(versions) == 0 {
		return nil, format.ErrNotFound
	}
	for {
		next := versions[0].Version + 1
		a, err := b.Attributes(ctx, format.ManifestKey(next))
		if errors.Is(err, blob.ErrNotFound) {
			return versions, nil
		}
		if err != nil {
			return nil, err
		}
		// A store's answer to a HEAD dates an object to the second
		// (Last-Modified), its listing finer (S3 and MinIO: the
		// millisecond). Taken as it is, a version created in the same
		// second as the one listed before it would look older than that
		// one, which gcGhosts would then take for a ghost — a version
		// written after a newer one — and delete. It is dated no earlier
		// than the newest listed: it is newer by number, and a ghost
		// among them shows to the next collection's listing.
		written := a.ModTime
		if written.Before(versions[0].Written) {
			written = versions[0].Written
		}
		versions = append([]VersionAge{{next, written}}, versions...)
	}
}

// gcBoundary is the newest version that is neither among the newest
// KeepVersions nor younger than RetainFor (0: none), held below every
// version a named consumer has yet to read unless that version is older
// than ConsumerRetention; p has its defaults.
func gcBoundary(versions []VersionAge, consumers []table.Consumer, p GCPolicy, now time.Time) uint64 {
	var boundary, expired uint64
	for i, v := range versions {
		if boundary == 0 && i >= p.KeepVersions && now.Sub(v.Written) >= p.RetainFor {
			boundary = v.Version
		}
		if expired == 0 && now.Sub(v.Written) >= p.ConsumerRetention {
			expired = v.Version
		}
	}
	for _, c := range consumers {
		// A consumer through c.Version reads its changes from there:
		// version c.Version (at least 1) and every later one.
		if hold := max(c.Version, 1) - 1; hold < boundary {
			boundary = min(boundary, max(hold, expired))
		}
	}
	return boundary
}

// gcKeep returns the versions kept, newest first: above the boundary,
// tagged, or described by the Iceberg view (pinned).
func gcKeep(versions []VersionAge, boundary uint64, tags []table.Tag, pinned []uint64) []uint64 {
	tagged := map[uint64]bool{}
	for _, t := range tags {
		tagged[t.Version] = true
	}
	for _, v := range pinned {
		tagged[v] = true
	}
	var keep []uint64
	for _, v := range versions {
		if v.Version > boundary || tagged[v.Version] {
			keep = append(keep, v.Version)
		}
	}
	return keep
}

// referencedBy returns the objects a manifest references.
func referencedBy(m *format.Manifest) map[string]bool {
	out := map[string]bool{}
	if m == nil {
		return out
	}
	for _, k := range m.Objects() {
		out[k] = true
	}
	return out
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
		if errors.Is(err, format.ErrVersionNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("compactor: gc: reading v%d, created during the collection: %w", v, err)
		}
		for k := range referencedBy(m) {
			out[k] = true
		}
	}
}

func pruneOrphanRecords(ctx context.Context, b blob.Bucket, now time.Time) error {
	for o, err := range blob.List(ctx, b, format.OrphansDir, 0) {
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
