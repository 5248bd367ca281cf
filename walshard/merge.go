package walshard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/internal/backoff"
	"github.com/stratadb/strata/table"
)

// MergeResult says what a merge pass did.
type MergeResult struct {
	Generations int    // generations merged
	Rows        int64  // rows they held
	Watermark   uint64 // the shard's watermark afterwards
	Version     uint64 // the table version that recorded it (0: nothing to merge)
	Done        bool   // another merge already covered these generations
}

// Merge commits the flushed generations above the table's watermark (up to
// the per-pass caps) into the base table, in one commit that also records
// the shard's new watermark; then it deletes the WAL entries they cover.
// A generation is a Parquet fragment already, so it joins the table as it
// is, without a copy; compaction folds such fragments later. It returns ErrMergeRunning
// when a merge of this handle is already running.
func (s *Shard) Merge(ctx context.Context) (res MergeResult, err error) {
	if s.opts.Listener.MergeEnd != nil {
		start := time.Now()
		defer func() {
			if !errors.Is(err, ErrMergeRunning) {
				s.opts.Listener.MergeEnd(res, time.Since(start), err)
			}
		}()
	}
	return s.merge(ctx)
}

func (s *Shard) merge(ctx context.Context) (MergeResult, error) {
	if !s.merging.CompareAndSwap(false, true) {
		return MergeResult{}, ErrMergeRunning
	}
	defer func() {
		s.merging.Store(false)
		s.mu.Lock()
		s.broadcastLocked()
		s.mu.Unlock()
	}()
	// Nothing flushed awaits a merge as far as this handle knows, and its
	// log is clean: an idle shard makes no request.
	s.mu.Lock()
	idle := len(s.mu.gens.pending()) == 0 && s.mu.gens.cleaned >= s.mu.gens.watermark
	watermark := s.mu.gens.watermark
	s.mu.Unlock()
	if idle {
		return MergeResult{Watermark: watermark}, s.fencedErr()
	}
	// A pass takes a generation of upserts alone (mergePass): passes go
	// on while the one before installed something and more awaits, so
	// that a shard mixing upserts and appends does not fall behind.
	var total MergeResult
	for range maxPasses {
		res, err := s.mergePassRetrying(ctx)
		if err != nil {
			return total, err
		}
		total.Generations += res.Generations
		total.Rows += res.Rows
		total.Watermark, total.Done = res.Watermark, res.Done
		total.Version = max(total.Version, res.Version)
		s.mu.Lock()
		more := len(s.mu.gens.pending()) > 0
		s.mu.Unlock()
		if res.Generations == 0 || !more {
			break
		}
	}
	return total, nil
}

// maxPasses bounds the passes of one Merge.
const maxPasses = 16

// mergePassRetrying runs one merge pass, planned again when another merge
// of the shard moved the watermark meanwhile.
func (s *Shard) mergePassRetrying(ctx context.Context) (MergeResult, error) {
	for range 10 {
		if err := s.fencedErr(); err != nil {
			return MergeResult{}, err
		}
		res, err := s.mergeOnce(ctx)
		if commit.IsRetryableConflict(err) {
			continue // another merge of this shard moved the watermark: re-plan
		}
		return res, err
	}
	return MergeResult{}, fmt.Errorf("walshard: shard %q: merge kept conflicting", s.id)
}

// Merging reports whether a merge is running.
func (s *Shard) Merging() bool { return s.merging.Load() }

func (s *Shard) mergeOnce(ctx context.Context) (MergeResult, error) {
	// A newer owner may have opened the shard: then this handle must not
	// make anything visible.
	if err := s.checkEpoch(ctx); err != nil {
		return MergeResult{}, err
	}
	base, err := table.ReadLatest(ctx, s.b)
	if err != nil {
		return MergeResult{}, err
	}
	watermark := base.Shards[s.id].Watermark
	s.noteWatermark(watermark, base.Version)
	s.mu.Lock()
	state := s.mu.gens.state
	s.mu.Unlock()
	pending := state.pending(watermark)
	pass := mergePass(pending, s.opts.MergeMaxGenerations, s.opts.MergeMaxBytes)
	if len(pass) == 0 {
		return MergeResult{Watermark: watermark}, s.cleanup(ctx, watermark)
	}
	// Generations are Parquet fragments already: the merge adds them to
	// the table as they are, with no copy, by the installer every merge
	// uses (install).
	var rows int64
	for _, g := range pass {
		rows += g.Rows
	}
	started := time.Now()
	var in installed
	part := shardPart{shard: s.id, epoch: s.epoch, gens: pass}
	if len(pass) == len(pending) {
		part.seq = state.Seq // the state's every generation (see table.ShardMark.Seq)
	}
	if len(pass[0].Keys) > 0 {
		in, err = installKeyed(ctx, s.b, base, part, s.opts.Commit)
	} else {
		in, err = install(ctx, s.b, base, []shardPart{part}, s.opts.Commit, 1, 0)
	}
	if s.opts.Listener.CommitEnd != nil {
		s.opts.Listener.CommitEnd(time.Since(started), err)
	}
	if err != nil {
		return MergeResult{}, err
	}
	s.rebases.Add(int64(in.rebases))
	if _, ok := in.merged[s.id]; !ok {
		// Nothing of ours was committed: another merge took these
		// generations (the table's watermark covers them), or the table
		// records a newer epoch for the shard — then this handle is fenced.
		m, err := table.ReadLatest(ctx, s.b)
		if err != nil {
			return MergeResult{}, err
		}
		mark := m.Shards[s.id]
		if mark.Epoch > s.epoch {
			return MergeResult{}, s.setFenced()
		}
		s.noteWatermark(mark.Watermark, m.Version)
		return MergeResult{Watermark: mark.Watermark, Version: in.version, Done: true}, s.cleanup(ctx, mark.Watermark)
	}
	top := in.merged[s.id]
	s.noteWatermark(top, in.version)
	s.merges.Add(1)
	if err := blob.DeleteAll(ctx, s.b, in.stale); err != nil {
		in.errs = append(in.errs, fmt.Errorf("walshard: taking down the hints of merged generations: %w", err))
	}
	if len(in.errs) > 0 {
		return MergeResult{}, errors.Join(in.errs...)
	}
	if err := s.dropMergedFlushes(ctx, in.manifest); err != nil {
		return MergeResult{}, err
	}
	return MergeResult{Generations: len(pass), Rows: rows, Watermark: top, Version: in.version}, s.cleanup(ctx, top)
}

// mergePass is what one merge of a shard takes of its pending
// generations: a generation of upserts alone (its rows replace rows by
// key, MergeKeyed), else the generations of appends before the next one
// of upserts, up to maxGens and maxBytes (at least one).
func mergePass(pending []Generation, maxGens int, maxBytes int64) []Generation {
	if len(pending) > 0 && len(pending[0].Keys) > 0 {
		return pending[:1]
	}
	var pass []Generation
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

// checkEpoch fails with ErrFenced when a newer epoch is claimed (one
// LIST of one key).
func (s *Shard) checkEpoch(ctx context.Context) error {
	asked := s.now()
	page, err := s.b.ListPage(ctx, s.l.epochs(), "", 1)
	if err != nil {
		return err
	}
	newest := uint64(0)
	if len(page.Objects) > 0 {
		if e, ok := parseLast(s.l.epochs(), page.Objects[0].Key); ok {
			newest = e
		}
	}
	if newest > s.epoch {
		if err := s.fencedErr(); err != nil {
			return err
		}
		return s.fencedOrDropped(ctx, page.Objects[0].Key)
	}
	if newest < s.epoch {
		// This handle's own claim is not listed: a listing that lags
		// behind, or garbage collection retired the shard (every object
		// of it gone, the claims last) while this owner was away; it is
		// fenced then, and opens again above what the table records.
		if _, err := s.b.Attributes(ctx, s.l.epochKey(s.epoch)); errors.Is(err, blob.ErrNotFound) {
			return s.fencedOrDropped(ctx, "")
		} else if err != nil {
			return err
		}
	}
	if err := s.fencedErr(); err != nil {
		return err
	}
	s.mu.Lock()
	if asked.After(s.mu.wal.verified) {
		s.mu.wal.verified = asked
	}
	s.mu.Unlock()
	return nil
}

func (s *Shard) noteWatermark(w, version uint64) {
	s.mu.Lock()
	if s.mu.gens.note(w, version) {
		s.broadcastLocked()
	}
	s.mu.Unlock()
}

// tidy cleans up after the merges this handle learned of and has not
// cleaned up after yet (a fleet merge's, learned by a flush).
func (s *Shard) tidy(ctx context.Context) error {
	s.mu.Lock()
	watermark, cleaned := s.mu.gens.watermark, s.mu.gens.cleaned
	s.mu.Unlock()
	if watermark <= cleaned {
		return nil
	}
	return s.cleanup(ctx, watermark)
}

// cleanup deletes the WAL entries that merged generations cover. Entries
// above the state's flushed position, and the newest state objects, stay:
// fencing and replay need them. Merged generations are table fragments now
// and stay too, and so do the WAL entries that are parts of them.
//
// Below the oldest merged generation the state lists, an entry at or
// below the state's PartsUpTo may be part of a generation merged and
// dropped from the state before this cleanup ran: those are left to
// garbage collection (compactor.GC), which deletes a WAL entry once it is
// at or below the shard's watermark and no kept version references it.
// From the oldest merged generation listed to the newest, the state lists
// every generation, so every entry part there is known.
func (s *Shard) cleanup(ctx context.Context, watermark uint64) (err error) {
	s.mu.Lock()
	state := s.mu.gens.state
	s.mu.Unlock()
	var from, to uint64
	keep := map[uint64]bool{}
	for _, g := range state.Generations {
		if g.Gen > watermark {
			continue
		}
		if from == 0 || g.WALFrom < from {
			from = g.WALFrom
		}
		to = max(to, g.WALTo)
		maps.Copy(keep, g.entryParts())
	}
	to = min(to, state.WALFlushed)
	defer func() {
		if err == nil {
			s.mu.Lock()
			s.mu.gens.cleaned = max(s.mu.gens.cleaned, watermark)
			s.mu.Unlock()
		}
	}()
	if to > 0 {
		// A fence's age is the store's: the WAL lists newest first, and
		// the newest entry's modification time is a lower bound of the
		// store's clock, taken when it is behind this owner's — an owner
		// whose clock runs ahead must not delete a fence still young.
		var now time.Time
		var doomed []string
		for o, err := range blob.List(ctx, s.b, s.l.wal(), 0) {
			if err != nil {
				return err
			}
			if now.IsZero() {
				now = s.now()
				if !o.ModTime.IsZero() && o.ModTime.Before(now) {
					now = o.ModTime
				}
			}
			pos, ok := parseLast(s.l.wal(), o.Key)
			if !ok || pos > to || keep[pos] || (pos < from && pos <= state.PartsUpTo) {
				continue
			}
			if o.Size == walHeader && now.Sub(o.ModTime) < fenceKeep {
				continue // a fence (the only entry this small), kept a while (see fenceKeep)
			}
			doomed = append(doomed, o.Key)
		}
		// Entries at or below the flushed position are never read again:
		// they may go in any order.
		if err := blob.DeleteAll(ctx, s.b, doomed); err != nil {
			return err
		}
	}
	return s.dropOldStates(ctx)
}

// dropOldStates deletes the state objects builds before flush objects
// left under state/, but the newest (the stand-in that keeps such a build
// off the shard, see moveOldStates), once, by the handle that moved the
// shard to flush objects: one LIST, and a request per thousand objects.
// (A handle that dies first leaves them to the shard's retirement.)
func (s *Shard) dropOldStates(ctx context.Context) error {
	s.mu.Lock()
	todo := s.mu.gens.oldStates
	s.mu.Unlock()
	if !todo {
		return nil
	}
	var doomed []string
	first := true
	for o, err := range blob.List(ctx, s.b, s.l.states(), 0) {
		if err != nil {
			return err
		}
		if !first {
			doomed = append(doomed, o.Key)
		}
		first = false
	}
	if err := blob.DeleteAll(ctx, s.b, doomed); err != nil {
		return err
	}
	s.mu.Lock()
	s.mu.gens.oldStates = false
	s.mu.Unlock()
	return nil
}

// dropMergedFlushes deletes this shard's flush objects that m (the
// version its merge made) records as merged (mergedFlushes), as a fleet
// merge does for every shard, at most once every flushKeep: for a shard
// whose owner merges it, where no fleet merge lists them.
func (s *Shard) dropMergedFlushes(ctx context.Context, m *table.Manifest) error {
	s.mu.Lock()
	due := s.now().Sub(s.mu.gens.flushesDroppedAt) >= flushKeep
	s.mu.Unlock()
	if !due || m == nil {
		return nil
	}
	asked := s.now()
	var fl []listedFlush
	for o, err := range blob.List(ctx, s.b, s.l.flushes(), 0) {
		if err != nil {
			return err
		}
		if seq, ok := parseLast(s.l.flushes(), o.Key); ok {
			fl = append(fl, listedFlush{key: o.Key, seq: seq, modTime: o.ModTime})
		}
	}
	if len(fl) == 0 {
		return nil
	}
	doomed := mergedFlushes(map[string][]listedFlush{s.id: fl}, m, asked)
	if err := blob.DeleteAll(ctx, s.b, doomed); err != nil {
		return err
	}
	s.mu.Lock()
	s.mu.gens.flushesDroppedAt = asked
	s.mu.Unlock()
	return nil
}

// mergeLoop merges every MergeInterval, backing off after a failure.
func (s *Shard) mergeLoop() {
	ctx := s.ctx // ends with Close
	wait := s.opts.MergeInterval
	for {
		if backoff.Sleep(ctx, wait) != nil {
			return // closed
		}
		var err error
		if s.opts.FleetMerge {
			_, err = s.fleetMergeSafe(ctx)
		} else {
			_, err = s.mergeSafe(ctx)
		}
		switch {
		case errors.Is(err, ErrFenced) || ctx.Err() != nil:
			return
		case err != nil && !errors.Is(err, ErrMergeRunning):
			wait = min(2*wait, 30*time.Second)
		default:
			wait = s.opts.MergeInterval
		}
	}
}

// Drain flushes the memtable and merges until no generation awaits
// merging: what a worker does before it leaves, and a server on shutdown.
// A merge already running (from MergeInterval) is waited for.
func (s *Shard) Drain(ctx context.Context) error {
	if _, err := s.Flush(ctx); err != nil {
		return err
	}
	for {
		s.mu.Lock()
		changed := s.changedLocked() // taken first: the running merge's end closes it
		s.mu.Unlock()
		res, err := s.Merge(ctx)
		if errors.Is(err, ErrMergeRunning) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-s.stop:
				return ErrClosed
			case <-changed:
			}
			continue
		}
		if err != nil {
			return err
		}
		if res.Generations == 0 && s.Stats().PendingGenerations == 0 {
			return nil
		}
	}
}

// fleetMergeSafe runs a fleet merge for the loop of a handle that opted
// in, a panic turned into an error.
func (s *Shard) fleetMergeSafe(ctx context.Context) (res FleetResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("walshard: shard %q: fleet merge panicked: %v", s.id, r)
		}
	}()
	if err := s.fencedErr(); err != nil {
		return res, err
	}
	return FleetMerge(ctx, s.b, &FleetOptions{Commit: s.opts.Commit, Memory: &s.fleet})
}

// mergeSafe is Merge with a panic turned into an error, for the
// background loop.
func (s *Shard) mergeSafe(ctx context.Context) (res MergeResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("walshard: shard %q: merge panicked: %v", s.id, r)
		}
	}()
	return s.Merge(ctx)
}

// announceMerged records, after a merge moved shard's watermark from
// `from` to `to` over gens, that it did (for the owner and fleet merges),
// and takes down what announced the generations as pending. The records
// are hints: a failure here leaves extra objects, never a wrong table.
func announceMerged(ctx context.Context, b blob.Bucket, shard string, from, to uint64, gens []Generation) error {
	if err := recordMerged(ctx, b, shard, from, to); err != nil {
		return err
	}
	return blob.DeleteAll(ctx, b, mergedHints(shard, from, to, gens))
}

// announced tells whether g was announced under _fleet/pending/, as
// builds before flush objects did: a generation in a flush object is
// found by listing those.
func announced(g Generation) bool {
	for _, f := range g.fragments() {
		if inFlush(f.Key) {
			return false
		}
	}
	return true
}

// recordEvery: a merge records a shard's watermark (table.MergedKey) only
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
	if err := b.PutIfAbsent(ctx, table.MergedKey(shard, at), nil); err != nil && !errors.Is(err, blob.ErrExists) {
		return fmt.Errorf("walshard: shard %q: recording the merge: %w", shard, err)
	}
	return nil
}

// mergedHints are the hints a merge of gens that moved shard's watermark
// from `from` to `to` made stale, to delete once its new record is there:
// the generations' announcements and, when it made a record, the previous
// one (at the multiple below, or at `from` itself, where builds that
// recorded every watermark left it).
func mergedHints(shard string, from, to uint64, gens []Generation) []string {
	keys := []string{}
	if prev := recordedAt(from); recordedAt(to) > prev {
		if prev > 0 {
			keys = append(keys, table.MergedKey(shard, prev))
		}
		if from > prev {
			keys = append(keys, table.MergedKey(shard, from))
		}
	}
	for _, g := range gens {
		if announced(g) {
			keys = append(keys, table.PendingKey(shard, g.Gen, g.Seq))
		}
	}
	return keys
}
