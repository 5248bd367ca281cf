package walshard

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard/fleetmerge"
	"github.com/stratadb/strata/walshard/wal"
)

// Stats is the LSM view of one shard.
type Stats struct {
	Shard string `json:"shard"`
	Epoch uint64 `json:"epoch"`
	// WAL positions: the newest written, and the newest in a generation;
	// replay starts above WALFlushed. WALLag is the difference.
	WALLastWritten uint64 `json:"wal_last_written"`
	WALFlushed     uint64 `json:"wal_flushed"`
	WALLag         uint64 `json:"wal_lag"`
	// The memtable (zero when read from the bucket by Inspect).
	MemtableRows  int64 `json:"memtable_rows"`
	MemtableBytes int64 `json:"memtable_bytes"`
	// MemtableFrom is the lowest WAL position the memtable holds (0 when it
	// is empty): every entry below it is flushed or set aside.
	MemtableFrom uint64 `json:"memtable_from"`
	// Generations awaiting merge, above the table's watermark as this
	// handle knows it: its own merges at once, a fleet merge's at the
	// next flush that reads the shard's merge record (at most every 2 min;
	// a fleet merge records a shard's watermark every sixteen generations).
	// Rows come from the shard's state object: counting them costs no
	// reads.
	Watermark          uint64 `json:"watermark"`
	PendingGenerations int    `json:"pending_generations"`
	PendingBytes       int64  `json:"pending_bytes"`
	PendingRows        int64  `json:"pending_rows"`
	NewestGeneration   uint64 `json:"newest_generation"`
	Merging            bool   `json:"compacting"`
	// Merges and MergeRebases count this handle's merge commits and the
	// times they caught up with other commits (zero from Inspect).
	Merges       int64 `json:"merges,omitempty"`
	MergeRebases int64 `json:"merge_rebases,omitempty"`
	// Quarantined: WAL entries set aside because their rows could not go
	// into a generation (see Quarantined); their copies stay in the
	// bucket for an operator.
	Quarantined []Quarantined `json:"quarantined,omitempty"`
	// Local: read from the owning handle (Stats), so the memtable and
	// Merging are known; false when read from the bucket (Inspect).
	Local bool `json:"local"`
	// LastWrite: the newest WAL entry or state (Inspect only).
	LastWrite time.Time `json:"last_write,omitzero"`
}

func fillPending(st *Stats, state *wal.State) {
	st.WALFlushed = state.WALFlushed
	st.NewestGeneration = state.NextGen - 1
	for _, g := range state.Pending(st.Watermark) {
		st.PendingGenerations++
		st.PendingBytes += g.Bytes
		st.PendingRows += g.Rows
	}
}

// StatsAt is Stats as of the watermark version m records for the shard,
// when it is newer than the handle's: other processes (fleet merges) move
// it without this handle. Reading stats changes nothing.
func (s *Shard) StatsAt(m *format.Manifest) Stats { return s.stats(m.Shards[s.id].Watermark) }

// Stats returns the handle's view, with no I/O.
func (s *Shard) Stats() Stats { return s.stats(0) }

// stats is the handle's view, at watermark w when it is newer.
func (s *Shard) stats(w uint64) Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Shard: s.id, Epoch: s.epoch, WALLastWritten: s.mu.wal.nextPos - 1, MemtableRows: s.mu.mem.rows,
		MemtableBytes: s.mu.mem.bytes, Watermark: max(s.mu.gens.watermark, w), Merging: s.merging.Load(),
		Merges: s.merges.Load(), MergeRebases: s.rebases.Load(), Quarantined: slices.Clone(s.mu.quarantined), Local: true}
	if len(s.mu.mem.entries) > 0 {
		st.MemtableFrom = s.mu.mem.entries[0].pos
	}
	fillPending(&st, s.mu.gens.state)
	st.WALLag = st.WALLastWritten - min(st.WALFlushed, st.WALLastWritten)
	return st
}

// Inspect reads a shard's stats from the bucket, without owning it: one
// LIST each for the epoch, the WAL end, the state and quarantined entries,
// one GET for the state, and the table's latest manifest for the
// watermark. The memtable of another process cannot be seen from the
// bucket: MemtableRows and MemtableBytes are zero, Local false.
func Inspect(ctx context.Context, b blob.Bucket, id string) (Stats, error) {
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		return Stats{}, err
	}
	return InspectAt(ctx, b, id, m)
}

// InspectAt is Inspect against a manifest already read.
func InspectAt(ctx context.Context, b blob.Bucket, id string, m *format.Manifest) (Stats, error) {
	if err := wal.CheckShardID(id); err != nil {
		return Stats{}, err
	}
	l := wal.NewLayout(id)
	page, err := b.ListPage(ctx, l.Epochs(), "", 1)
	if err != nil {
		return Stats{}, err
	}
	if len(page.Objects) == 0 {
		return Stats{}, fmt.Errorf("%w %q", ErrUnknownShard, id)
	}
	st := Stats{Shard: id}
	st.Epoch, _ = wal.ParseLast(l.Epochs(), page.Objects[0].Key)
	st.Watermark = m.Shards[id].Watermark
	state, err := wal.ReadState(ctx, b, l)
	if err != nil {
		return Stats{}, err
	}
	fillPending(&st, state)
	last, end, err := fleetmerge.LastActivity(ctx, b, l)
	if err != nil {
		return Stats{}, err
	}
	st.LastWrite = last
	for o, err := range blob.List(ctx, b, l.Quarantine(), 0) {
		if err != nil {
			return Stats{}, err
		}
		pos, _ := wal.ParseLast(l.Quarantine(), o.Key)
		st.Quarantined = append(st.Quarantined, Quarantined{Position: pos, Key: o.Key})
	}
	// Merged entries are deleted; the flushed position is still written.
	st.WALLastWritten = max(end, st.WALFlushed)
	st.WALLag = st.WALLastWritten - min(st.WALFlushed, st.WALLastWritten)
	return st, nil
}

// ScanFresh scans the base table's latest version, then this shard's
// generations that it has not merged, then the memtable: every row this
// handle acknowledged, each exactly once, with the rows other writers
// merged into the base table. Generations are never deleted while newer
// versions reference them or they await merging, so all three parts
// stream; memory stays bounded as for a scan.
func (s *Shard) ScanFresh(ctx context.Context, opts table.ScanOptions) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		opts.WithRowAddress = false
		if err := s.resolveUnsure(ctx); err != nil {
			yield(nil, err)
			return
		}
		base, err := s.freshBase(ctx)
		if err != nil {
			yield(nil, err)
			return
		}
		// A newer owner (a restart elsewhere, an adopter) claims its epoch
		// before it merges what this handle holds: checked after the base
		// is read, a claim not seen means the base has none of it.
		if err := s.checkEpoch(ctx); err != nil {
			yield(nil, err)
			return
		}
		watermark := base.Manifest().Shards[s.id].Watermark
		// The memtable and the state change together under the lock.
		s.mu.Lock()
		gens := s.mu.gens.state.Pending(watermark)
		var mem []arrow.RecordBatch
		var keys [][]string
		var entries []wal.EntryNames
		for _, me := range s.mu.mem.entries {
			if len(me.appends) > 0 {
				entries = append(entries, wal.EntryNames{First: len(mem), N: len(me.batches), Appends: me.appends})
			}
			for _, rec := range me.batches {
				rec.Retain()
				mem = append(mem, rec)
				keys = append(keys, me.keys)
			}
		}
		s.mu.Unlock()
		defer func() {
			for _, rec := range mem {
				rec.Release()
			}
		}()
		schema := base.Manifest().Schema()
		if !schema.Equal(s.schema) {
			// The table's schema changed since this handle opened: its
			// rows are read as the new schema reads them.
			for i, rec := range mem {
				ev, err := evolve.Batch(opts.Allocator, schema, rec)
				if err != nil {
					yield(nil, err)
					return
				}
				rec.Release()
				mem[i] = ev
			}
		}
		wal.ScanFresh(ctx, s.b, schema, base, gens, mem, keys, entries, opts, yield)
	}
}

// freshBase opens the latest version, or the version this handle's last
// merge made if the listing does not show it yet (a store whose listings
// lag behind its writes): the state no longer lists generations that
// merge covered, so an older base would miss their rows.
func (s *Shard) freshBase(ctx context.Context) (*table.Snapshot, error) {
	base, err := table.Open(ctx, s.b, nil)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	known, version := s.mu.gens.watermark, s.mu.gens.version
	s.mu.Unlock()
	switch {
	case base.Manifest().Shards[s.id].Watermark >= known:
		return base, nil
	case version > base.Version():
		return table.Open(ctx, s.b, &table.OpenOptions{Version: version})
	case version != 0:
		return base, nil
	}
	// The handle learned its watermark from a fleet merge's record, which
	// does not say in which version: read the versions after the base by
	// name (names do not lag as listings do) until one shows it.
	for v := base.Version() + 1; ; v++ {
		m, err := table.ReadManifest(ctx, s.b, v)
		if errors.Is(err, format.ErrVersionNotFound) {
			return nil, fmt.Errorf("walshard: shard %q: no version from v%d on shows watermark %d, which a fleet merge recorded: %w",
				s.id, base.Version(), known, blob.ErrRetryable)
		}
		if err != nil {
			return nil, err
		}
		if m.Shards[s.id].Watermark >= known {
			return table.Open(ctx, s.b, &table.OpenOptions{Version: v})
		}
	}
}
