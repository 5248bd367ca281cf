package fleetmerge

import (
	"context"
	"sync"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard/wal"
)

// Memory is what fleet merges of one table remember between passes.
// The zero value is ready for use.
type Memory struct {
	mu sync.Mutex
	// settled: shard → the sequence number of its newest flush object,
	// which holds nothing to merge.
	settled map[string]uint64
	// due: when the first listed flush object that is merged becomes old
	// enough to delete (zero: none waits).
	due time.Time
	// noneAnnounced: when a listing last found no announcement (zero:
	// one did, or none listed yet).
	noneAnnounced time.Time
	// lags: the states merges read, for Lags.
	lags lagMemory
}

// announcementsEvery: a memory that found no announcement (which only
// builds before flush objects make) lists them again this long after.
const announcementsEvery = time.Minute

// listAnnounced lists the announcements, or finds none without a request
// when the memory found none within announcementsEvery.
func (m *Memory) listAnnounced(ctx context.Context, b blob.Bucket, now time.Time) (map[string]*hint, error) {
	if m != nil {
		m.mu.Lock()
		recent := !m.noneAnnounced.IsZero() && now.Sub(m.noneAnnounced) < announcementsEvery
		m.mu.Unlock()
		if recent {
			return nil, nil
		}
	}
	hints, err := listPending(ctx, b)
	if m != nil && err == nil {
		m.mu.Lock()
		if len(hints) == 0 {
			m.noneAnnounced = now
		} else {
			m.noneAnnounced = time.Time{}
		}
		m.mu.Unlock()
	}
	return hints, err
}

// quiet tells whether a listing finds nothing the memory does not know:
// every shard's newest flush object settled, no announcement, and no
// merged flush object old enough to delete.
func (m *Memory) quiet(hints map[string]*hint, flushes map[string][]wal.ListedFlush, now time.Time) bool {
	if m == nil || len(hints) > 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.due.IsZero() && !now.Before(m.due) {
		return false
	}
	for shard, fl := range flushes {
		if seq, ok := m.settled[shard]; !ok || fl[0].Seq != seq {
			return false
		}
	}
	return true
}

// isSettled tells whether shard's newest flush object, seq, is settled.
func (m *Memory) isSettled(shard string, seq uint64) bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.settled[shard]
	return ok && s == seq
}

// settle remembers shard's newest flush object, seq, as holding nothing
// to merge.
func (m *Memory) settle(shard string, seq uint64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.settled == nil {
		m.settled = map[string]uint64{}
	}
	m.settled[shard] = seq
}

// wait remembers when the merged flush objects of a listing, as latest
// records them, that are not old enough to delete yet become so.
func (m *Memory) wait(flushes map[string][]wal.ListedFlush, latest *format.Manifest, now time.Time) {
	if m == nil {
		return
	}
	var due time.Time
	for shard, fl := range flushes {
		mark := latest.Shards[shard]
		for _, f := range fl[1:] {
			if at := f.ModTime.Add(wal.FlushKeep); f.Seq <= mark.Seq && now.Before(at) && (due.IsZero() || at.Before(due)) {
				due = at
			}
		}
	}
	m.mu.Lock()
	m.due = due
	m.mu.Unlock()
}

// Idle tells whether a fleet merge of the table would find nothing new
// since the passes this memory remembers: no announcement (a LIST a
// minute at most, when it finds none) and every shard's flush objects as
// they were (one LIST page per thousand objects).
func (m *Memory) Idle(ctx context.Context, b blob.Bucket, now time.Time) (bool, error) {
	hints, err := m.listAnnounced(ctx, b, now)
	if err != nil || len(hints) > 0 {
		return false, err
	}
	flushes, err := wal.ListFlushes(ctx, b)
	if err != nil {
		return false, err
	}
	return m.quiet(nil, flushes, now), nil
}

// settleDrained settles the shards of parts a merge drained (merged
// to) up to their newest flush object: nothing is left in them.
func (m *Memory) settleDrained(parts []ShardPart, flushes map[string][]wal.ListedFlush, merged map[string]uint64) {
	for _, p := range parts {
		if fl := flushes[p.Shard]; p.Seq != 0 && fl != nil && fl[0].Seq == p.Seq && merged[p.Shard] == p.Gens[len(p.Gens)-1].Gen {
			m.settle(p.Shard, p.Seq)
		}
	}
}
