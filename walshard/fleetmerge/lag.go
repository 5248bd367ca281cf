package fleetmerge

import (
	"context"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard/wal"
)

// Every shard's lag, seen from another process. An owner knows its own
// shard's lag (Stats); a worker's is in no process the metrics reach.
// The compactor Job reads it from the bucket: fleet merges remember each
// state they read (Memory), with its flushed position and the
// generations it leaves above the table's watermark, and Lags adds
// each shard's WAL end. A shard whose newest flush object the table
// records as merged (ShardMark.Seq) has nothing pending, and its flushed
// position is the table's (ShardMark.WAL).

// ShardLag is a shard's lag as read from the bucket.
type ShardLag struct {
	Shard string
	// WALLag: WAL entries above the flushed position (entries merged and
	// deleted are not counted). When the newest state was not read,
	// the flushed position is the table's, and WALLag counts the entries
	// of unmerged generations too.
	WALLag uint64
	// Pending: generations above the table's watermark; -1 when the
	// shard's newest state was not read (a fleet merge reads it).
	Pending int
}

// seenState is what a fleet merge read of a shard's newest state.
type seenState struct {
	seq, walFlushed uint64
	gens            []uint64 // generations above the watermark after the merge
}

// lagMemory is the states fleet merges read (Memory.seen).
type lagMemory struct {
	mu   sync.Mutex
	seen map[string]seenState
}

// see remembers the states the plans of a pass read, with the generations
// each leaves above latest's watermark.
func (m *Memory) see(plans []fleetPlan, latest *format.Manifest) {
	if m == nil {
		return
	}
	m.lags.mu.Lock()
	defer m.lags.mu.Unlock()
	if m.lags.seen == nil {
		m.lags.seen = map[string]seenState{}
	}
	for _, p := range plans {
		if p.state != nil {
			s := seenState{seq: p.state.Seq, walFlushed: p.state.WALFlushed}
			for _, g := range p.state.Pending(latest.Shards[p.shard].Watermark) {
				s.gens = append(s.gens, g.Gen)
			}
			m.lags.seen[p.shard] = s
		}
	}
}

// Lags reads the lag of every registered shard of the table at m
// (every owner registers its shard before it writes; an adoption that
// leaves nothing in a shard takes its registration down, and it costs
// nothing more). It costs a LIST page per thousand registered shards and
// per thousand flush objects, and a LIST of one key per registered shard
// (its WAL's newest entry); the states come from what mem's fleet merges
// read (nil: none). Shards are read 32 at once.
func Lags(ctx context.Context, b blob.Bucket, m *format.Manifest, mem *Memory) ([]ShardLag, error) {
	ids, err := Registered(ctx, b)
	if err != nil {
		return nil, err
	}
	flushes, err := wal.ListFlushes(ctx, b)
	if err != nil {
		return nil, err
	}
	var seen map[string]seenState
	if mem != nil {
		mem.lags.mu.Lock()
		seen = make(map[string]seenState, len(mem.lags.seen))
		for k, v := range mem.lags.seen {
			seen[k] = v
		}
		mem.lags.mu.Unlock()
	}
	out := make([]ShardLag, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i, id := range ids {
		g.Go(func() error {
			page, err := b.ListPage(gctx, format.WALDir(id), "", 1)
			if err != nil {
				return err
			}
			var end uint64
			if len(page.Objects) > 0 {
				end, _ = wal.ParseLast(format.WALDir(id), page.Objects[0].Key)
			}
			mark := m.Shards[id]
			flushed, pending := mark.WAL, -1
			var newest uint64
			if fl := flushes[id]; fl != nil {
				newest = fl[0].Seq
			}
			switch s, ok := seen[id]; {
			case ok && s.seq >= newest:
				// Merges since (the owner's own) move the watermark.
				flushed, pending = s.walFlushed, 0
				for _, g := range s.gens {
					if g > mark.Watermark {
						pending++
					}
				}
			case newest <= mark.Seq:
				pending = 0
			}
			out[i] = ShardLag{Shard: id, WALLag: end - min(flushed, end), Pending: pending}
			return nil
		})
	}
	return out, g.Wait()
}

// Registered lists the shards registered under _fleet/shards/, sorted.
func Registered(ctx context.Context, b blob.Bucket) ([]string, error) {
	var out []string
	for o, err := range blob.List(ctx, b, format.FleetShardsDir, 0) {
		if err != nil {
			return nil, err
		}
		if id := strings.TrimPrefix(o.Key, format.FleetShardsDir); wal.CheckShardID(id) == nil {
			out = append(out, id)
		}
	}
	return out, nil
}
