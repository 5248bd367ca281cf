package walshard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/internal/backoff"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/walshard/wal"
)

// Flush seals the memtable into a generation: a Parquet object under the
// shard, recorded in a new state object. It returns the generation number
// (0 when the memtable was empty). Flushes are serialised; appends go on
// while one runs. When more than MaxPendingGenerations generations await
// merging, Flush waits for a merge.
func (s *Shard) Flush(ctx context.Context) (gen uint64, err error) {
	if s.opts.Listener.FlushEnd != nil {
		start := time.Now()
		defer func() { s.opts.Listener.FlushEnd(gen, time.Since(start), err) }()
	}
	// The runs after the first (a memtable alternating appends and
	// upserts) do not wait for room: the generations they would wait on
	// are this call's own, which a merge after it takes.
	for first := true; ; first = false {
		g, more, err := s.flush(ctx, first)
		if err != nil {
			return gen, err
		}
		gen = max(gen, g)
		if !more {
			break
		}
	}
	// What merges by others took since the last clean-up (the flush
	// learned their watermark): the WAL entries they cover can go.
	return gen, s.tidy(ctx)
}

// waitForMerges waits while MaxPendingGenerations generations await
// merging (a write stall, told to the listener when it ends).
func (s *Shard) waitForMerges(ctx context.Context) (err error) {
	var stall time.Time // when the wait began
	defer func() { s.stalled(StallGenerations, stall, err) }()
	for {
		if err := s.fencedErr(); err != nil {
			return err
		}
		s.mu.Lock()
		n := len(s.mu.gens.pending())
		changed := s.changedLocked()
		s.mu.Unlock()
		if n < s.opts.MaxPendingGenerations {
			return nil
		}
		if stall.IsZero() {
			stall = time.Now()
		}
		// Merges move the watermark: this handle's own, or a fleet
		// merge's (the Job's), which it learns by reading the shard's
		// merge record now and then (one LIST of one key), and the
		// table's manifest when that is not enough.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.stop:
			return ErrClosed
		case <-changed:
		case <-time.After(fleetMergeCheck):
			if err := s.learnWhileWaiting(ctx); err != nil {
				return err
			}
		}
	}
}

// flush seals the oldest entries of the memtable of one mode (appends, or
// upserts by the same keys) into a generation; more tells whether entries
// it saw were left for the next one.
func (s *Shard) flush(ctx context.Context, wait bool) (_ uint64, more bool, err error) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if wait {
		if err := s.waitForMerges(ctx); err != nil {
			return 0, false, err
		}
	}
	if err := s.fencedErr(); err != nil {
		return 0, false, err
	}
	if err := s.resolveUnsureLocked(ctx); err != nil {
		return 0, false, err
	}
	s.mu.Lock()
	entries := s.mu.mem.snapshot()
	s.mu.Unlock()
	if len(entries) == 0 {
		return 0, false, nil
	}
	// A generation holds appends or upserts by one set of keys, so that
	// a merge can replace rows by its keys alone.
	for i, me := range entries {
		if !slices.Equal(me.keys, entries[0].keys) {
			entries, more = entries[:i], true
			break
		}
	}
	// What fleet merges took since: the new state need not list it, and
	// what it covers can be cleaned up. Read at most every learnEvery: a
	// merged generation the state still lists costs a few bytes of JSON,
	// where the read is a LIST a flush.
	s.mu.Lock()
	learn := s.now().Sub(s.mu.gens.learnedAt) >= learnEvery
	s.mu.Unlock()
	if learn {
		if err := s.learnWatermark(ctx); err != nil {
			return 0, false, err
		}
	}
	next, g, rest := s.nextState(entries)
	gen := g.Gen
	batches, release, err := generationOf(ctx, s.schema, next, rest)
	if err != nil {
		return 0, false, err
	}
	defer release()
	if err := s.recordGeneration(ctx, next, gen, batches); err != nil {
		var bad *wal.UnencodableError
		var unsure *wal.UnsureError
		if errors.As(err, &unsure) {
			// The state may be in the bucket, its generation merged by a
			// fleet merge while the memtable still holds its rows: it is
			// read back before the next flush or fresh read.
			s.mu.Lock()
			s.mu.gens.unsure = &unsureFlush{next: next, entries: len(entries)}
			s.mu.Unlock()
		}
		if errors.As(err, &bad) {
			// An entry that cannot be encoded must not hold back the
			// others: it is quarantined, and the next flush goes on
			// without it.
			if n, qerr := s.quarantineUnencodable(ctx, rest); qerr != nil || n > 0 {
				return 0, false, errors.Join(err, qerr)
			}
		}
		return 0, false, err
	}
	s.mu.Lock()
	// The state and the memtable change under one lock: a fresh read sees
	// the flushed rows in the generation or in the memtable, never both.
	s.mu.gens.state, s.mu.gens.stateAt = next, s.now()
	s.mu.mem.drop(len(entries))
	s.broadcastLocked() // appends waiting for room
	s.mu.Unlock()
	return gen, more, nil
}

// resolveUnsureLocked reads back the state of a flush whose outcome was
// unknown (s.flushMu held): landed, it is the handle's state and the
// entries it took leave the memtable, as after a flush; there, another
// owner's, the handle is fenced; not there, the flush did not happen.
// Until it is resolved, no flush or fresh read goes on: a fleet merge may
// have merged the state's generation, whose rows the memtable still holds.
func (s *Shard) resolveUnsureLocked(ctx context.Context) error {
	u := s.pendingUnsure()
	if u == nil {
		return nil
	}
	got, _, err := wal.ReadFlush(ctx, s.b, s.l.FlushKey(u.next.Seq), u.next.Seq)
	switch {
	case err == nil && got.ID == u.next.ID:
		s.mu.Lock()
		s.mu.gens.state, s.mu.gens.stateAt, s.mu.gens.unsure = u.next, s.now(), nil
		s.mu.mem.drop(u.entries)
		s.broadcastLocked()
		s.mu.Unlock()
		return nil
	case err == nil:
		return s.setFenced()
	case errors.Is(err, blob.ErrNotFound):
		s.mu.Lock()
		s.mu.gens.unsure = nil
		s.mu.Unlock()
		return nil
	}
	return fmt.Errorf("walshard: shard %q: reading back the state of a flush whose outcome was unknown: %w", s.id, err)
}

// resolveUnsure is resolveUnsureLocked for a fresh read: it takes the
// flush lock only when there is something to resolve.
func (s *Shard) resolveUnsure(ctx context.Context) error {
	if s.pendingUnsure() == nil {
		return nil
	}
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	return s.resolveUnsureLocked(ctx)
}

// pendingUnsure returns the flush whose outcome is unknown, if any.
func (s *Shard) pendingUnsure() *unsureFlush {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.gens.unsure
}

// fleetMergeCheck: how often a flush waiting for room looks for a fleet
// merge that made it.
const fleetMergeCheck = time.Second

// learnEvery: how often a flush reads the shard's merge record (the
// fleet merges it missed); a flush waiting for room reads it every
// fleetMergeCheck. What it learns is not urgent: until then a state lists
// the generations merged meanwhile (a few hundred bytes each, in a flush
// object fleet merges delete), and the WAL entries they cover wait for
// the next clean-up. Every two minutes, it is half a request a
// shard-minute.
const learnEvery = 2 * time.Minute

// tableCheck and tableCheckMax: how often a flush waiting for room reads
// the table's manifest when the merge records do not make room (they are
// made every recordEvery generations): after tableCheck, then twice as
// long after each read that found no merge, up to tableCheckMax — a fleet
// whose Job is down does not read its manifest ever faster.
const (
	tableCheck    = 10 * time.Second
	tableCheckMax = 2 * time.Minute
)

// learnWhileWaiting learns the watermark for a flush that waits for
// room: from the shard's merge record, and when that leaves the flush
// waiting, from the table itself now and then (tableCheck) — a record
// lags up to recordEvery generations behind a fleet merge, more than
// MaxPendingGenerations may allow.
func (s *Shard) learnWhileWaiting(ctx context.Context) error {
	if err := s.learnWatermark(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	full := len(s.mu.gens.pending()) >= s.opts.MaxPendingGenerations
	wait := max(s.mu.gens.tableWait, tableCheck)
	due := s.now().Sub(s.mu.gens.readTableAt) >= wait
	s.mu.Unlock()
	if !full || !due {
		return nil
	}
	asked := s.now()
	m, err := table.ReadLatest(ctx, s.b)
	if errors.Is(err, format.ErrNotFound) || err == nil && s.l.Table != "" && m.TableID != s.l.Table {
		// The table was dropped (and maybe made again) while the writer
		// stalled, reading no claim of its shard: it learns it here, and
		// its stalled appends end with ErrDropped rather than wait on
		// merges that cannot come.
		return s.fencedOrDropped(ctx, "")
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	before := s.mu.gens.watermark
	if s.mu.gens.note(m.Shards[s.id].Watermark, m.Version) {
		s.broadcastLocked()
	}
	if s.mu.gens.watermark > before {
		wait = tableCheck
	} else {
		wait = min(2*wait, tableCheckMax)
	}
	s.mu.gens.readTableAt, s.mu.gens.tableWait = asked, wait
	s.mu.Unlock()
	return nil
}

// learnWatermark reads the newest merge record of the shard (one LIST of
// one key): fleet merges move the watermark without the owner.
func (s *Shard) learnWatermark(ctx context.Context) error {
	asked := s.now()
	page, err := s.b.ListPage(ctx, format.FleetMergedDir+s.id+"/", "", 1)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.mu.gens.learnedAt = asked
	s.mu.Unlock()
	for _, o := range page.Objects {
		if w, ok := format.ParseInverted(strings.TrimPrefix(o.Key, format.FleetMergedDir+s.id+"/")); ok {
			s.noteWatermark(w, 0)
		}
	}
	return nil
}

// nextState is the state a flush of entries records: the one before,
// with the generation of entries (g, whose rows not in parts are rest's).
func (s *Shard) nextState(entries []memEntry) (next *wal.State, g wal.Generation, rest []memEntry) {
	s.mu.Lock()
	state := s.mu.gens.state
	watermark := s.mu.gens.watermark
	producers := s.mu.names.producers
	s.mu.Unlock()
	next = &wal.State{Seq: state.Seq + 1, Epoch: s.epoch, ID: format.NewID(),
		WALFlushed: entries[len(entries)-1].pos, MergedBelow: watermark}
	g, rest = s.planGeneration(state.NextGen, next.Seq, entries)
	next.NextGen = g.Gen + 1
	next.Generations = append(state.Pending(watermark), g)
	next.PartsUpTo = state.PartsUpTo
	next.Producers = producers.Expire(s.now())
	for pos := range g.EntryParts() {
		next.PartsUpTo = max(next.PartsUpTo, pos)
	}
	return next, g, rest
}

// planGeneration plans the next generation of entries (nextGen: the
// state's next generation number), recorded by the flush object of state
// seq: the rows of the entries that are not reused go into that object
// (rest), and the reused ones (entries this handle wrote as fragments, of
// at least ReuseBytes) are listed as parts beside it. A generation with
// parts is numbered by its newest WAL position, so that every part's key
// names a number above the previous generation's and at most its own (see
// Part); an entry whose position would not (below nextGen, which a build
// before this numbering may have counted up to) is written into the
// object instead. The rows, statistics and sizes of what the object holds
// are set when it is written (writeState).
func (s *Shard) planGeneration(nextGen, seq uint64, entries []memEntry) (g wal.Generation, rest []memEntry) {
	last := entries[len(entries)-1].pos
	g = wal.Generation{Gen: nextGen, WALFrom: entries[0].pos, WALTo: last, Seq: seq}
	var parts []wal.Part
	for _, me := range entries {
		if me.reuse != nil && me.pos >= nextGen {
			parts = append(parts, wal.Part{Key: me.reuse.Key, Rows: me.reuse.Rows, Bytes: me.reuse.Bytes, Columns: me.reuse.Columns})
			continue
		}
		rest = append(rest, me)
	}
	if len(parts) > 0 {
		g.Gen = last
	}
	if keys := entries[0].keys; len(keys) > 0 {
		g.Keys = keys
	}
	key := s.l.FlushKey(seq)
	if len(g.Keys) == 0 {
		g.Named = namedRows(entries, rest, key) // of upserts: keyedNamed, once the rows are known
	}
	if len(parts) == 0 {
		g.Key = key
		return g, rest
	}
	if len(rest) > 0 {
		parts = append(parts, wal.Part{Key: key})
	}
	g.Parts = parts
	for _, p := range parts {
		g.Rows += p.Rows
		g.Bytes += p.Bytes
	}
	return g, rest
}

// quarantineUnencodable finds the entries whose rows cannot be written as
// a fragment, quarantines them and takes them out of the memtable; it
// returns how many it found.
func (s *Shard) quarantineUnencodable(ctx context.Context, entries []memEntry) (int, error) {
	var bad []memEntry
	var reasons []string
	for _, me := range entries {
		if _, _, err := fragment.Encode(s.schema, me.batches, nil); err != nil {
			bad, reasons = append(bad, me), append(reasons, err.Error())
		}
	}
	for i, me := range bad {
		if err := s.quarantine(ctx, me.pos, reasons[i]); err != nil {
			return 0, err
		}
		s.mu.Lock()
		if s.mu.mem.remove(me.pos) {
			s.broadcastLocked()
		}
		s.mu.Unlock()
	}
	return len(bad), nil
}

// loopRetry paces the background flush and merge loops after a failure.
var loopRetry = backoff.Policy{Base: 10 * time.Millisecond, Max: 5 * time.Second}

// flushLoop flushes when triggered (memtable over its bound) or when the
// memtable is older than FlushInterval, backing off after a failure.
func (s *Shard) flushLoop() {
	ctx := s.ctx // ends with Close
	tick := time.Hour
	if s.opts.FlushInterval > 0 {
		tick = max(s.opts.FlushInterval/4, time.Millisecond)
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-s.stop:
			return
		case <-s.flushq:
		case <-t.C:
			s.mu.Lock()
			due := s.opts.FlushInterval > 0 && len(s.mu.mem.entries) > 0 && time.Since(s.mu.mem.since) >= s.opts.FlushInterval
			s.mu.Unlock()
			if !due {
				err := s.keepAlive(ctx)
				switch {
				case errors.Is(err, ErrFenced):
					return
				case err != nil && ctx.Err() == nil && s.opts.Listener.BackgroundError != nil:
					// Tried again at the next tick; told, never dropped.
					s.opts.Listener.BackgroundError("keep-alive", err)
				}
				continue
			}
		}
		if _, err := s.flushSafe(ctx); err != nil {
			if errors.Is(err, ErrFenced) || ctx.Err() != nil {
				return
			}
			failures++
			if backoff.Sleep(ctx, loopRetry.Delay(failures)) != nil {
				return // closed
			}
			s.triggerFlush()
			continue
		}
		failures = 0
	}
}

// recordGeneration writes the state next, which records generation gen,
// in a flush object holding batches (the rows of gen not in its parts).
// A state write collides with a newer owner's state, unless garbage
// collection retired the shard since, or a drop deleted it (its states
// gone): an owner that has not read the claims for epochRecheck reads
// them first, as before a WAL write (see FenceForDrop).
func (s *Shard) recordGeneration(ctx context.Context, next *wal.State, gen uint64, batches []arrow.RecordBatch) error {
	s.mu.Lock()
	quiet := s.now().Sub(s.mu.wal.verified) > epochRecheck
	s.mu.Unlock()
	if quiet {
		if err := s.checkEpoch(ctx); err != nil {
			return err
		}
	}
	if err := wal.WriteState(ctx, s.b, s.l, s.schema, next, batches); err != nil {
		if errors.Is(err, wal.ErrStateTaken) {
			return s.setFenced()
		}
		return fmt.Errorf("walshard: shard %q: record generation %d: %w", s.id, gen, err)
	}
	s.mu.Lock()
	s.mu.wal.wrote = s.now()
	s.mu.Unlock()
	return nil
}

// KeepAliveEvery is how often an open, idle shard writes its state again
// (one PUT, and a LIST of the claims first), so that its newest object is
// never older than that: garbage collection retires only shards quiet for
// far longer (compactor.MinRetireShardsAfter), and never the shard of a
// live owner that has had nothing to write.
const KeepAliveEvery = 6 * time.Hour

// keepAlive writes the state again, unchanged but for its sequence number
// and id, when this handle has written none for KeepAliveEvery. It reads
// the claims first: a handle that was paused while its shard was retired
// is fenced instead, and writes nothing.
func (s *Shard) keepAlive(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	state, at := s.mu.gens.state, s.mu.gens.stateAt
	s.mu.Unlock()
	if s.now().Sub(at) < KeepAliveEvery {
		return nil
	}
	if err := s.checkEpoch(ctx); err != nil {
		return err
	}
	next := *state
	next.Seq, next.Epoch, next.ID = state.Seq+1, s.epoch, format.NewID()
	if err := wal.WriteState(ctx, s.b, s.l, s.schema, &next, nil); err != nil {
		if errors.Is(err, wal.ErrStateTaken) {
			return s.setFenced()
		}
		return err
	}
	s.mu.Lock()
	s.mu.gens.state, s.mu.gens.stateAt = &next, s.now()
	s.mu.wal.wrote = s.now()
	s.mu.Unlock()
	return nil
}

// flushSafe is Flush with a panic turned into an error, for the
// background loop.
func (s *Shard) flushSafe(ctx context.Context) (gen uint64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("walshard: shard %q: flush panicked: %v", s.id, r)
		}
	}()
	return s.Flush(ctx)
}
