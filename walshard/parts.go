package walshard

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/walshard/wal"
)

// The parts of a shard's state (Shard.mu). Each is touched only by its own
// code: the WAL writer (append.go) owns walPositions; appends, replay and
// flushes the memtable; flushes and merges the flushed generations; the
// append path the names.

// walPositions is the WAL writer's: where the next entry goes, and what
// it does not know of the entries it wrote.
type walPositions struct {
	nextPos   uint64
	uncertain uint64 // a WAL position an attempt may have landed at unseen
	// uncertainIDs: the entry ids of the attempts there, by which the
	// shard knows the entry as its own if it finds it later.
	uncertainIDs []string
	// verified: when this handle last knew (reading the claims, or
	// claiming) that no newer epoch was claimed: see epochRecheck.
	verified time.Time
	// wrote: when this handle last wrote to the shard (its claim, a WAL
	// entry, a state). An entry written after it was quiet for
	// KeepAliveEvery is acknowledged only once the claims, read after it
	// landed, show this handle's epoch the newest: garbage collection
	// may have retired the shard meanwhile (see writeEntry).
	wrote time.Time
	// schemaChecked: when a check that found the handle's schema the
	// table's newest began (see checkSchema); schemaStale: a check found
	// a newer one, and no write is acknowledged any more. Zero at open:
	// the first write checks, as a listing may have shown an older
	// version than the newest.
	schemaChecked time.Time
	schemaStale   error
}

// memtable holds the rows acknowledged and not yet flushed, entry by
// entry, in WAL order.
type memtable struct {
	entries     []memEntry
	rows, bytes int64
	since       time.Time // when the oldest entry landed
}

type memEntry struct {
	pos     uint64
	batches []arrow.RecordBatch
	rows    int64
	bytes   int64
	// reuse: the entry's own object as a fragment, when it is one this
	// handle wrote of at least ReuseBytes.
	reuse *format.Fragment
	// keys: the key columns (stored names) of an entry of upserts.
	keys []string
	// appends: the entry's named appends, with where their rows are.
	appends []wal.AppendRecord
}

// add appends an entry (taking its batches' references).
func (m *memtable) add(me memEntry) {
	if len(m.entries) == 0 {
		m.since = time.Now()
	}
	m.entries = append(m.entries, me)
	m.rows += me.rows
	m.bytes += me.bytes
}

// snapshot returns the entries now (a flush's), which later adds leave
// alone.
func (m *memtable) snapshot() []memEntry { return m.entries[:len(m.entries):len(m.entries)] }

// drop removes the oldest n entries (flushed), releasing their batches.
func (m *memtable) drop(n int) {
	for _, me := range m.entries[:n] {
		m.rows -= me.rows
		m.bytes -= me.bytes
		for _, rec := range me.batches {
			rec.Release()
		}
	}
	m.entries = m.entries[n:]
	if len(m.entries) > 0 {
		m.since = time.Now()
	}
}

// remove takes the entry at WAL position pos out (quarantined), releasing
// its batches; it tells whether there was one.
func (m *memtable) remove(pos uint64) bool {
	for j, me := range m.entries {
		if me.pos == pos {
			m.rows -= me.rows
			m.bytes -= me.bytes
			fragment.ReleaseAll(me.batches)
			m.entries = append(m.entries[:j], m.entries[j+1:]...)
			return true
		}
	}
	return false
}

// release drops every entry (the handle closes).
func (m *memtable) release() { m.drop(len(m.entries)) }

// flushedGenerations is what the shard knows of its flushed generations
// and of the table.
type flushedGenerations struct {
	state     *wal.State
	watermark uint64 // newest table watermark this handle saw
	version   uint64 // the table version it was seen in
	cleaned   uint64 // the watermark the WAL and states were cleaned up to
	// oldStates: this handle moved the shard from an older build's
	// state objects, which dropOldStates deletes; flushesDroppedAt: when this handle last deleted
	// its merged flush objects (dropMergedFlushes).
	oldStates        bool
	flushesDroppedAt time.Time
	learnedAt        time.Time     // when a flush last read the shard's merge record
	readTableAt      time.Time     // when a flush waiting for room last read the table
	tableWait        time.Duration // how long it waits before it reads it again
	stateAt          time.Time     // when this handle last wrote a state (keepAlive)
	// unsure is a flush whose state's create this handle could not tell
	// landed or not (resolveUnsure).
	unsure *unsureFlush
}

// unsureFlush is a flush whose outcome is unknown: its state, and the
// memtable entries (the first of them) it took.
type unsureFlush struct {
	next    *wal.State
	entries int
}

// note records watermark w, seen in version; it tells whether it moved.
func (g *flushedGenerations) note(w, version uint64) bool {
	if w > g.watermark || (w == g.watermark && version > g.version) {
		g.watermark, g.version = w, version
		return true
	}
	return false
}

// pending returns the generations above the watermark seen.
func (g *flushedGenerations) pending() []wal.Generation { return g.state.Pending(g.watermark) }
