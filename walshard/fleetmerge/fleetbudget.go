package fleetmerge

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard/wal"
)

// A fleet merge's memory. A pass holds, at once, the flush objects it
// has read (their bytes), their rows decoded when they cannot be copied
// page for page (a column added since they were flushed), and, while it
// writes the merged fragment, the row group the fragment is joining. With
// Options.MemoryBudget it holds to the budget, and never waits on
// itself:
//
//   - the merged fragment's row group takes its share first (a quarter of
//     the budget, up to 64 MiB: fleetOutputShare), and the rest bounds
//     the pass's bytes (Options.MaxBytes, at most the rest);
//   - reading the shards' newest states, a flush object is read whole and
//     kept for the merge while those kept fit in the rest; beyond it only
//     its state is read (the object's tail, format.FooterValueAt), and the
//     merge reads the object again if the pass takes it;
//   - the pass takes the shards in order while the objects it must still
//     read fit and, when any must be decoded, while their decoded rows fit
//     too (format.DecodedBytes); the first shard is taken even past the
//     budget, alone; the others wait for the next pass, which Merge
//     makes at once.
//
// The budget is counted, not waited on: Result.PeakMemory is the
// most a pass held by its count.
type fleetBudget struct {
	size int64 // what the flush objects and their rows may hold
	out  int64 // the merged fragment's row group
	mu   sync.Mutex
	held int64
	peak int64
}

// newFleetBudget returns the budget of a pass (nil: none).
func newFleetBudget(budget int64) *fleetBudget {
	if budget <= 0 {
		return nil
	}
	out := fleetOutputShare(budget)
	return &fleetBudget{size: budget - out, out: out}
}

// fleetOutputShare is the merged fragment's row group of a fleet merge
// within budget (0: the copy's default row group).
func fleetOutputShare(budget int64) int64 {
	if budget <= 0 {
		return 0
	}
	return min(budget/4, 64<<20)
}

// take counts n more bytes held when they fit in the budget, or when
// alone is set (the pass's first shard); it reports whether it did. A
// nil budget takes everything.
func (m *fleetBudget) take(n int64, alone bool) bool {
	if m == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held+n > m.size && !alone {
		return false
	}
	m.held += n
	m.peak = max(m.peak, m.held)
	return true
}

// give counts n bytes a take counted as no longer held.
func (m *fleetBudget) give(n int64) {
	if m == nil || n == 0 {
		return
	}
	m.mu.Lock()
	m.held -= n
	m.mu.Unlock()
}

// most is the most the pass held at once, with the merged fragment's
// row group when it wrote one.
func (m *fleetBudget) most(wrote bool) int64 {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if wrote {
		return m.peak + m.out
	}
	return m.peak
}

// rowGroupBytes is the merged fragment's row group (0: the default).
func (m *fleetBudget) rowGroupBytes() int64 {
	if m == nil {
		return 0
	}
	return m.out
}

// readNewest reads the state in shard's newest flush object f: the whole
// object, kept for the merge and counted in m (its length), when it fits
// in the budget, else only its tail.
func (m *fleetBudget) readNewest(ctx context.Context, b blob.Bucket, f wal.ListedFlush) (*wal.State, []byte, error) {
	if m == nil || f.Size <= 0 || m.take(f.Size, false) {
		st, data, err := wal.ReadFlush(ctx, b, f.Key, f.Seq)
		if m != nil && f.Size > 0 {
			m.give(f.Size)
		}
		if err != nil {
			return nil, nil, err
		}
		m.take(int64(len(data)), true)
		return st, data, nil
	}
	v, ok, err := format.FooterValueAt(ctx, b, f.Key, f.Size, wal.StateFooterKey)
	if err != nil && !errors.Is(err, format.ErrCorrupt) {
		return nil, nil, err // the store's: gone, or worth trying again
	}
	st, err := wal.FlushState(f.Key, f.Seq, f.Size, v, ok, err)
	return st, nil, err
}

// room is what the budget has left (nil: unbounded).
func (m *fleetBudget) room() int64 {
	if m == nil {
		return math.MaxInt64
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(m.size-m.held, 0)
}

// dropUnused lets go of the flush objects part's data holds that none of
// its generations needs (a shard's newest, when the pass takes fewer of
// its generations), giving their bytes back to m.
func dropUnused(part *ShardPart, m *fleetBudget) {
	for key, d := range part.data {
		used := false
		for _, g := range part.Gens {
			used = used || slices.ContainsFunc(g.Fragments(), func(f format.Fragment) bool { return f.Key == key })
		}
		if !used {
			delete(part.data, key)
			if m != nil {
				m.give(int64(len(d)))
				part.weight -= int64(len(d))
			}
		}
	}
}

// toRead is what reading each of part's generations' flush objects not
// held yet in its data holds: their sizes, as the generations record them.
func toRead(part *ShardPart) ([]int64, error) {
	w := make([]int64, len(part.Gens))
	for i, g := range part.Gens {
		for _, f := range g.Fragments() {
			if wal.InFlush(f.Key) && f.Rows > 0 && part.data[f.Key] == nil {
				w[i] += f.Bytes
			}
		}
	}
	return w, nil
}

// decodedOf is what decoding each of part's generations' flush objects
// holds: their rows, as a scan counts them (format.DecodedBytes), for
// those read into its data.
func decodedOf(part *ShardPart) ([]int64, error) {
	w := make([]int64, len(part.Gens))
	for i, g := range part.Gens {
		for _, f := range g.Fragments() {
			d := part.data[f.Key]
			if !wal.InFlush(f.Key) || d == nil {
				continue
			}
			n, err := format.DecodedBytes(d)
			if err != nil {
				return nil, fmt.Errorf("walshard: shard %q: flush object %q is corrupt: %w", part.Shard, f.Key, err)
			}
			w[i] += n
		}
	}
	return w, nil
}

// admitParts takes parts in order while what weigh says each generation
// of each holds more fits in mem, adding it to the part's weight. When
// the first part does not fit whole, the others are given back first and
// it is cut to the longest run of its generations that fits (at least
// one). The parts left out are given back; later counts them and the
// cut. A part weigh fails on is weighed 0: reading it names the fault.
func admitParts(parts []ShardPart, mem *fleetBudget, weigh func(*ShardPart) ([]int64, error)) (kept []ShardPart, later int) {
	if mem == nil {
		return parts, 0
	}
	for i := range parts {
		p := &parts[i]
		ws, err := weigh(p)
		if err != nil {
			ws = make([]int64, len(p.Gens))
		}
		total := sum(ws)
		if !mem.take(total, false) {
			rest := parts[i:]
			if i == 0 {
				rest = parts[1:]
			}
			releaseParts(rest, mem)
			later += len(rest)
			if i > 0 {
				return kept, later
			}
			// What the generations left out hold comes back.
			held := heldOf(p)
			n, room := 1, mem.room()+sum(held)
			for n < len(ws) && sum(ws[:n+1])+sum(held[:n+1]) <= room {
				n++
			}
			if n < len(p.Gens) {
				p.Gens, p.Seq = p.Gens[:n], 0
				later++
				dropUnused(p, mem)
			}
			total = sum(ws[:n])
			mem.take(total, true)
			p.weight += total
			return []ShardPart{*p}, later
		}
		p.weight += total
		kept = append(kept, *p)
	}
	return kept, later
}

// heldOf is what part's data holds for each of its generations.
func heldOf(part *ShardPart) []int64 {
	w := make([]int64, len(part.Gens))
	for i, g := range part.Gens {
		for _, f := range g.Fragments() {
			w[i] += int64(len(part.data[f.Key]))
		}
	}
	return w
}

func sum(ws []int64) int64 {
	var n int64
	for _, w := range ws {
		n += w
	}
	return n
}
