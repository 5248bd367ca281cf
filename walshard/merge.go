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
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard/fleetmerge"
	"github.com/stratadb/strata/walshard/wal"
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
	for range fleetmerge.MaxPasses {
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
	pending := state.Pending(watermark)
	pass := fleetmerge.MergePass(pending, s.opts.MergeMaxGenerations, s.opts.MergeMaxBytes)
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
	var in fleetmerge.Installed
	part := fleetmerge.ShardPart{Shard: s.id, Epoch: s.epoch, Gens: pass}
	if len(pass) == len(pending) {
		part.Seq = state.Seq // the state's every generation (see table.ShardMark.Seq)
	}
	if len(pass[0].Keys) > 0 {
		in, err = fleetmerge.InstallKeyed(ctx, s.b, base, part, s.opts.Commit)
	} else {
		in, err = fleetmerge.Install(ctx, s.b, base, []fleetmerge.ShardPart{part}, s.opts.Commit, 1, 0)
	}
	if s.opts.Listener.CommitEnd != nil {
		s.opts.Listener.CommitEnd(time.Since(started), err)
	}
	if err != nil {
		return MergeResult{}, err
	}
	s.rebases.Add(int64(in.Rebases))
	if _, ok := in.Merged[s.id]; !ok {
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
		return MergeResult{Watermark: mark.Watermark, Version: in.Version, Done: true}, s.cleanup(ctx, mark.Watermark)
	}
	top := in.Merged[s.id]
	s.noteWatermark(top, in.Version)
	s.merges.Add(1)
	if err := blob.DeleteAll(ctx, s.b, in.Stale); err != nil {
		in.Errs = append(in.Errs, fmt.Errorf("walshard: taking down the hints of merged generations: %w", err))
	}
	if len(in.Errs) > 0 {
		return MergeResult{}, errors.Join(in.Errs...)
	}
	if err := s.dropMergedFlushes(ctx, in.Manifest); err != nil {
		return MergeResult{}, err
	}
	return MergeResult{Generations: len(pass), Rows: rows, Watermark: top, Version: in.Version}, s.cleanup(ctx, top)
}

// checkEpoch fails with ErrFenced when a newer epoch is claimed (one
// LIST of one key).
func (s *Shard) checkEpoch(ctx context.Context) error {
	asked := s.now()
	page, err := s.b.ListPage(ctx, s.l.Epochs(), "", 1)
	if err != nil {
		return err
	}
	newest := uint64(0)
	if len(page.Objects) > 0 {
		if e, ok := wal.ParseLast(s.l.Epochs(), page.Objects[0].Key); ok {
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
		if _, err := s.b.Attributes(ctx, s.l.EpochKey(s.epoch)); errors.Is(err, blob.ErrNotFound) {
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
		maps.Copy(keep, g.EntryParts())
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
		for o, err := range blob.List(ctx, s.b, s.l.WAL(), 0) {
			if err != nil {
				return err
			}
			if now.IsZero() {
				now = s.now()
				if !o.ModTime.IsZero() && o.ModTime.Before(now) {
					now = o.ModTime
				}
			}
			pos, ok := wal.ParseLast(s.l.WAL(), o.Key)
			if !ok || pos > to || keep[pos] || (pos < from && pos <= state.PartsUpTo) {
				continue
			}
			if o.Size == wal.Header && now.Sub(o.ModTime) < fenceKeep {
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
	for o, err := range blob.List(ctx, s.b, s.l.States(), 0) {
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
func (s *Shard) dropMergedFlushes(ctx context.Context, m *format.Manifest) error {
	s.mu.Lock()
	due := s.now().Sub(s.mu.gens.flushesDroppedAt) >= wal.FlushKeep
	s.mu.Unlock()
	if !due || m == nil {
		return nil
	}
	asked := s.now()
	var fl []wal.ListedFlush
	for o, err := range blob.List(ctx, s.b, s.l.Flushes(), 0) {
		if err != nil {
			return err
		}
		if seq, ok := wal.ParseLast(s.l.Flushes(), o.Key); ok {
			fl = append(fl, wal.ListedFlush{Key: o.Key, Seq: seq, ModTime: o.ModTime})
		}
	}
	if len(fl) == 0 {
		return nil
	}
	doomed := wal.MergedFlushes(map[string][]wal.ListedFlush{s.id: fl}, m, asked)
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
func (s *Shard) fleetMergeSafe(ctx context.Context) (res fleetmerge.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("walshard: shard %q: fleet merge panicked: %v", s.id, r)
		}
	}()
	if err := s.fencedErr(); err != nil {
		return res, err
	}
	return fleetmerge.Merge(ctx, s.b, &fleetmerge.Options{Commit: s.opts.Commit, Memory: &s.fleet})
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
