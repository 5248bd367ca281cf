package wal

import (
	"context"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
)

// Flush objects as fleet merges find, read and delete them.

// ListedFlush is one flush object a listing found.
type ListedFlush struct {
	Key     string
	Seq     uint64
	ModTime time.Time
	Size    int64 // as listed
}

// ListFlushes lists every shard's flush objects, newest first: one LIST
// page per thousand objects (each shard's newest, those awaiting a merge,
// and those merged within flushKeep).
func ListFlushes(ctx context.Context, b blob.Bucket) (map[string][]ListedFlush, error) {
	out := map[string][]ListedFlush{}
	for o, err := range blob.List(ctx, b, format.FleetFlushDir, 0) {
		if err != nil {
			return nil, err
		}
		shard, seq, ok := format.ParseFlushKey(o.Key)
		if !ok {
			continue
		}
		out[shard] = append(out[shard], ListedFlush{Key: o.Key, Seq: seq, ModTime: o.ModTime, Size: o.Size})
	}
	return out, nil
}

// FlushKeep: a flush object all of whose generations are merged is
// deleted once this old (the store's clock), so that a fresh read that
// read an older version of the table and the state that lists it still
// finds it.
const FlushKeep = time.Minute

// MergedFlushes returns the listed flush objects at or below the
// sequence number latest records for their shard (ShardMark.Seq: every
// generation they hold is merged, by copy), at least flushKeep old, but
// each shard's newest: those to delete.
func MergedFlushes(flushes map[string][]ListedFlush, latest *format.Manifest, now time.Time) []string {
	var doomed []string
	for shard, fl := range flushes {
		mark := latest.Shards[shard]
		for _, f := range fl[1:] {
			if f.Seq <= mark.Seq && now.Sub(f.ModTime) >= FlushKeep {
				doomed = append(doomed, f.Key)
			}
		}
	}
	return doomed
}

// HeldBefore counts, for each row offset of keep (and its end), the rows
// keep marks before it: where a row kept lands once the others are left
// out.
func HeldBefore(keep []bool) []int64 {
	held := make([]int64, len(keep)+1)
	for i, k := range keep {
		held[i+1] = held[i]
		if k {
			held[i+1]++
		}
	}
	return held
}
