package wal

import (
	"context"

	"github.com/stratadb/strata/blob"
)

// fenceSize is the size of a fence entry, the only WAL entry of that size
// (docs/format.md).
const fenceSize = 66

// HoldsNothing tells whether shard holds no row outside the table, whose
// watermark for it is watermark: its newest state lists no generation
// above the watermark, and its WAL holds nothing above the state's flushed
// position but fences. A shard without a state holds nothing: an owner
// writes its state before it acknowledges an entry, so a WAL entry without
// one was written by an owner that retirement fenced, and never
// acknowledged. Garbage collection retires a shard that holds nothing and
// has been quiet long enough (compactor.GCPolicy.RetireShardsAfter). It
// costs a LIST of the flush objects (and of an older build's states when
// there are none), a GET of the newest, and a LIST of the WAL's newest
// entries.
func HoldsNothing(ctx context.Context, b blob.Bucket, shard string, watermark uint64) (bool, error) {
	l := NewLayout(shard)
	for _, dir := range []string{l.Flushes(), l.States()} {
		page, err := b.ListPage(ctx, dir, "", 1)
		if err != nil {
			return false, err
		}
		if len(page.Objects) > 0 {
			return holdsNothing(ctx, b, l, watermark)
		}
	}
	return true, nil
}

func holdsNothing(ctx context.Context, b blob.Bucket, l Layout, watermark uint64) (bool, error) {
	st, err := ReadState(ctx, b, l)
	if err != nil {
		return false, err
	}
	if len(st.Pending(watermark)) > 0 {
		return false, nil
	}
	// Newest first: the entries above the flushed position come before
	// the rest.
	for o, err := range blob.List(ctx, b, l.WAL(), 0) {
		if err != nil {
			return false, err
		}
		pos, ok := ParseLast(l.WAL(), o.Key)
		if !ok {
			return false, nil // not the shard's: leave it be
		}
		if pos <= st.WALFlushed {
			break
		}
		if o.Size != fenceSize {
			return false, nil
		}
	}
	return true, nil
}
