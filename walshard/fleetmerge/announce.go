package fleetmerge

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard/wal"
)

// MaxPasses bounds the passes of one Merge.
const MaxPasses = 16

// MergePass is what one merge of a shard takes of its pending
// generations: a generation of upserts alone (its rows replace rows by
// key, MergeKeyed), else the generations of appends before the next one
// of upserts, up to maxGens and maxBytes (at least one).
func MergePass(pending []wal.Generation, maxGens int, maxBytes int64) []wal.Generation {
	if len(pending) > 0 && len(pending[0].Keys) > 0 {
		return pending[:1]
	}
	var pass []wal.Generation
	var bytes int64
	for _, g := range pending {
		if len(g.Keys) > 0 || len(pass) > 0 && (len(pass) >= maxGens || bytes+g.Bytes > maxBytes) {
			break
		}
		pass = append(pass, g)
		bytes += g.Bytes
	}
	return pass
}

// announceMerged records, after a merge moved shard's watermark from
// `from` to `to` over gens, that it did (for the owner and fleet merges),
// and takes down what announced the generations as pending. The records
// are hints: a failure here leaves extra objects, never a wrong table.
func announceMerged(ctx context.Context, b blob.Bucket, shard string, from, to uint64, gens []wal.Generation) error {
	if err := recordMerged(ctx, b, shard, from, to); err != nil {
		return err
	}
	return blob.DeleteAll(ctx, b, mergedHints(shard, from, to, gens))
}

// announced tells whether g was announced under _fleet/pending/, as
// builds before flush objects did: a generation in a flush object is
// found by listing those.
func announced(g wal.Generation) bool {
	for _, f := range g.Fragments() {
		if wal.InFlush(f.Key) {
			return false
		}
	}
	return true
}

// recordEvery: a merge records a shard's watermark (format.MergedKey) only
// when it crosses a multiple of recordEvery, and records that multiple,
// a lower bound of the watermark (what a merge takes is a contiguous run
// from the watermark, so everything at or below it is merged). Owners
// learn a fleet merge's progress that many generations late at most, for
// one request a shard every recordEvery generations instead of one every
// merge; a flush waiting for room reads the table itself (learnWhileWaiting).
// Sixteen generations are about as long as a flush waits between reads
// of the record (learnEvery) at a fleet's flush interval.
const recordEvery = 16

// recordedAt is the record a shard whose watermark is w has.
func recordedAt(w uint64) uint64 { return w / recordEvery * recordEvery }

// recordMerged creates the shard's record of its new watermark, when the
// move from `from` to `to` crosses a multiple of recordEvery.
func recordMerged(ctx context.Context, b blob.Bucket, shard string, from, to uint64) error {
	at := recordedAt(to)
	if at <= recordedAt(from) {
		return nil
	}
	if err := b.PutIfAbsent(ctx, format.MergedKey(shard, at), nil); err != nil && !errors.Is(err, blob.ErrExists) {
		return fmt.Errorf("walshard: shard %q: recording the merge: %w", shard, err)
	}
	return nil
}

// mergedHints are the hints a merge of gens that moved shard's watermark
// from `from` to `to` made stale, to delete once its new record is there:
// the generations' announcements and, when it made a record, the previous
// one (at the multiple below, or at `from` itself, where builds that
// recorded every watermark left it).
func mergedHints(shard string, from, to uint64, gens []wal.Generation) []string {
	keys := []string{}
	if prev := recordedAt(from); recordedAt(to) > prev {
		if prev > 0 {
			keys = append(keys, format.MergedKey(shard, prev))
		}
		if from > prev {
			keys = append(keys, format.MergedKey(shard, from))
		}
	}
	for _, g := range gens {
		if announced(g) {
			keys = append(keys, format.PendingKey(shard, g.Gen, g.Seq))
		}
	}
	return keys
}
