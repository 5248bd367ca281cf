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
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/wal"
)

// Shard retirement. A shard whose owner is gone for good (a pod of a
// Deployment, replaced at every rollout under a new name) keeps its
// claims, states (flush objects) and fences forever, and its registration, once its rows
// are merged or adopted. Garbage collection retires a shard that holds no
// row outside the table (walshard.HoldsNothing) and whose every object is
// older than GCPolicy.RetireShardsAfter: it deletes its objects but the
// generations a kept version references (which go later as any other),
// and its fleet hints; the WAL first (newest first, so that what is left
// of it is a run from its start), the epoch claims last (retiredLast).
// Before deleting anything the collector claims the next epoch itself
// (RetiredBy, fenceRetired), and deletes that claim after everything
// else: an owner that wakes while the retirement runs, or after it was
// cut short, meets a newer claim before its next write and is fenced; a
// retirement cut short leaves a shard that opens as any (its state while
// any WAL entry is left) and is retired by a later collection.
// A shard waits while its WAL holds an entry a kept version references
// (merged as a part), until compaction has replaced it, so that a
// retired shard's WAL is empty; and while its newest claim is newer than
// the epoch the table records for it: that owner has merged nothing
// since it opened the shard and may be live, and an owner opening the
// shard again must claim above it.
//
// The table's record of the shard (its watermark and epoch) stays: an
// owner that opens the shard again claims an epoch above it and writes
// above the watermark (walshard.Open); an old owner that wakes finds its
// claim gone, or a newer one, before it writes (the WAL, a state), and is
// fenced. An open shard, however idle, writes its state every
// walshard.KeepAliveEvery, so a live owner's shard is not retired.

// DefaultRetireShardsAfter is GCPolicy.RetireShardsAfter's default, and
// MinRetireShardsAfter its floor: twice walshard.KeepAliveEvery.
const (
	DefaultRetireShardsAfter = 24 * time.Hour
	MinRetireShardsAfter     = 2 * walshard.KeepAliveEvery
)

// retirable returns the shards of objects (a listing of ShardsDir) that
// may be retired at now: every object older than the retirement age, no
// WAL entry a kept version references (an entry merged as a part: the
// shard waits for compaction to replace it, so that a retired shard's WAL
// is empty and an owner opening it again replays nothing), no claim
// newer than the epoch the newest kept version records for the shard,
// and nothing held outside that version. It reads the state and the WAL's
// newest entries of those alone.
func retirable(ctx context.Context, b blob.Bucket, objects []blob.ObjectInfo, kept map[uint64]*format.Manifest, p GCPolicy, now time.Time) ([]string, error) {
	newest := newestOf(kept)
	if p.RetireShardsAfter < 0 || newest == nil {
		return nil, nil
	}
	referenced := map[string]bool{}
	for _, m := range kept {
		maps.Copy(referenced, referencedBy(m))
	}
	quiet, work := map[string]bool{}, map[string]bool{} // work: an object to delete
	for _, o := range objects {
		shard, ok := writerOf(o.Key)
		if !ok {
			continue
		}
		ok = now.Sub(o.ModTime) >= p.RetireShardsAfter && !(referenced[o.Key] && strings.HasPrefix(o.Key, format.WALDir(shard)))
		if e, claim := format.ParseShardKey(format.ShardEpochsDir(shard), o.Key); claim && e > newest.Shards[shard].Epoch {
			ok = ok && isRetirer(ctx, b, o.Key) // a retirement cut short: its own claim
		}
		if q, seen := quiet[shard]; !seen || q {
			quiet[shard] = ok
		}
		if !referenced[o.Key] {
			work[shard] = true
		}
	}
	var out []string
	for _, shard := range slices.Sorted(maps.Keys(quiet)) {
		if !quiet[shard] || !work[shard] {
			continue // written to lately, or only generations kept versions reference
		}
		empty, err := wal.HoldsNothing(ctx, b, shard, newest.Shards[shard].Watermark)
		if err != nil {
			return nil, fmt.Errorf("compactor: gc: shard %q: %w", shard, err)
		}
		if empty {
			out = append(out, shard)
		}
	}
	return out, nil
}

// shardOf is the shard a key under ShardsDir belongs to.
func shardOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, format.ShardsDir)
	if !ok {
		return "", false
	}
	shard, _, ok := strings.Cut(rest, "/")
	return shard, ok && shard != ""
}

// writerOf is the shard a key under ShardsDir, or a flush object's key,
// belongs to: an object its owners write.
func writerOf(key string) (string, bool) {
	if shard, _, ok := format.ParseFlushKey(key); ok {
		return shard, true
	}
	return shardOf(key)
}

// fleetHints lists the fleet objects of the shards retired: their
// registration, and their merge and pending hints.
func fleetHints(ctx context.Context, b blob.Bucket, shards []string) ([]blob.ObjectInfo, error) {
	var out []blob.ObjectInfo
	for _, shard := range shards {
		for _, prefix := range []string{format.FleetShardsDir + shard, format.FleetMergedDir + shard + "/", format.FleetPendingDir + shard + "/", format.FlushDir(shard)} {
			for o, err := range blob.List(ctx, b, prefix, 0) {
				if err != nil {
					return nil, err
				}
				if o.Key == prefix || strings.HasSuffix(prefix, "/") {
					out = append(out, o)
				}
			}
		}
	}
	return out, nil
}

// retiredLast orders the objects of retired shards for deletion, after
// everything else: the WAL, then generations and quarantined entries, the
// states, the fleet hints, and the epoch claims last. A retirement cut
// short leaves a shard that opens as well as before: its state is there
// while any WAL entry is (an owner replays nothing below the state's
// flushed position), and until the last claim goes an old owner still
// meets a newer claim (or finds its own gone).
func retiredLast(objects []blob.ObjectInfo, retired []string) {
	if len(retired) == 0 {
		return
	}
	slices.SortStableFunc(objects, func(a, c blob.ObjectInfo) int {
		return retireRank(a.Key, retired) - retireRank(c.Key, retired)
	})
}

// retiredShard reports whether key is an object of one of the retired
// shards (under its folder or among the fleet's hints).
func retiredShard(key string, retired []string) bool {
	shard, ok := shardOf(key)
	if !ok && strings.HasPrefix(key, format.FleetDir) {
		shard, ok = fleetShardOf(key)
	}
	return ok && slices.Contains(retired, shard)
}

// retireRank is a key's place in retiredLast's order (0: not a retired
// shard's, or its WAL).
func retireRank(key string, retired []string) int {
	if strings.HasPrefix(key, format.FleetFlushDir) {
		return 2 // the shard's states (a retired shard's: GC lists no other)
	}
	if strings.HasPrefix(key, format.FleetDir) {
		return 3 // (a retired shard's: GC lists no other)
	}
	shard, ok := shardOf(key)
	switch {
	case !ok || !slices.Contains(retired, shard), strings.HasPrefix(key, format.WALDir(shard)):
		return 0
	case strings.HasPrefix(key, format.ShardStatesDir(shard)):
		return 2
	case strings.HasPrefix(key, format.ShardEpochsDir(shard)):
		return 4
	}
	return 1
}

// reregister puts back the registration of a retired shard that a new
// owner opened while it was retired (a claim is there that the
// collection did not list), so that sweeps for abandoned shards see it.
func reregister(ctx context.Context, b blob.Bucket, shards []string) error {
	for _, shard := range shards {
		page, err := b.ListPage(ctx, format.ShardEpochsDir(shard), "", 1)
		if err != nil {
			return err
		}
		if len(page.Objects) == 0 {
			continue
		}
		if err := b.PutIfAbsent(ctx, format.FleetShardsDir+shard, nil); err != nil && !errors.Is(err, blob.ErrExists) {
			return fmt.Errorf("compactor: gc: registering shard %q again, opened while it was retired: %w", shard, err)
		}
	}
	return nil
}

// newestOf is the newest of the kept versions' manifests (nil: none).
func newestOf(ms map[uint64]*format.Manifest) *format.Manifest {
	var newest *format.Manifest
	for _, m := range ms {
		if newest == nil || m.Version > newest.Version {
			newest = m
		}
	}
	return newest
}

// RetiredBy is the body of the claim a collection makes on a shard it
// retires: no owner writes under it.
const RetiredBy = "strata garbage collection (retiring the shard)"

// isRetirer tells whether the claim at key is a retiring collection's.
func isRetirer(ctx context.Context, b blob.Bucket, key string) bool {
	data, err := b.Get(ctx, key)
	return err == nil && string(data) == RetiredBy
}

// fenceRetired claims, for each shard, the epoch after the newest listed
// among objects and after the one newest (the newest kept version)
// records for it — as an owner opening the shard claims: its claims may be
// gone already, a retirement before this one having taken them — as
// RetiredBy. It returns the shards fenced and the claims made; a shard
// whose next epoch another claimed first (an owner opening it), or that
// holds an object the listing did not (writtenSince), is left alone.
func fenceRetired(ctx context.Context, b blob.Bucket, shards []string, objects []blob.ObjectInfo, newest *format.Manifest) (fenced, claims []string, err error) {
	for _, shard := range shards {
		var top uint64
		if newest != nil {
			top = newest.Shards[shard].Epoch
		}
		for _, o := range objects {
			if e, ok := format.ParseShardKey(format.ShardEpochsDir(shard), o.Key); ok && e > top && strings.HasPrefix(o.Key, format.ShardEpochsDir(shard)) {
				top = e
			}
		}
		key := format.ShardEpochKey(shard, top+1)
		switch err := b.PutIfAbsent(ctx, key, []byte(RetiredBy)); {
		case errors.Is(err, blob.ErrExists):
			if !isRetirer(ctx, b, key) {
				continue // an owner opened it meanwhile
			}
		case err != nil:
			return nil, nil, fmt.Errorf("compactor: gc: fencing shard %q to retire it: %w", shard, err)
		}
		written, err := writtenSince(ctx, b, shard, objects, key)
		if err != nil {
			return nil, nil, err
		}
		if written {
			// An owner wrote after the listing and before the claim: it may
			// have acknowledged rows. The shard is not retired; the claim
			// stays (epochs only go up), fencing that owner, and its rows
			// are adopted as any abandoned shard's.
			continue
		}
		fenced, claims = append(fenced, shard), append(claims, key)
	}
	return fenced, claims, nil
}

// writtenSince lists shard again, after the collector's claim at own, and
// tells whether any object there is not among objects (the listing the
// collection planned from): an owner's write the listing missed. An
// owner's entry that lands after this listing is not acknowledged: the
// owner, quiet as the shard was, reads the claims after its write and
// finds this one (walshard's writeEntry).
func writtenSince(ctx context.Context, b blob.Bucket, shard string, objects []blob.ObjectInfo, own string) (bool, error) {
	listed := map[string]bool{own: true}
	for _, o := range objects {
		listed[o.Key] = true
	}
	for _, dir := range []string{format.ShardDir(shard), format.FlushDir(shard)} {
		for o, err := range blob.List(ctx, b, dir, 0) {
			if err != nil {
				return false, fmt.Errorf("compactor: gc: listing shard %q again after fencing it: %w", shard, err)
			}
			if !listed[o.Key] {
				return true, nil
			}
		}
	}
	return false, nil
}

// fleetShardOf is the shard a key under FleetDir names.
func fleetShardOf(key string) (string, bool) {
	for _, dir := range []string{format.FleetShardsDir, format.FleetMergedDir, format.FleetPendingDir, format.FleetFlushDir} {
		if rest, ok := strings.CutPrefix(key, dir); ok {
			shard, _, _ := strings.Cut(rest, "/")
			return shard, shard != ""
		}
	}
	return "", false
}
