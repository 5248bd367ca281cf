package walshard

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/internal/plant"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/walshard/fleetmerge"
	"github.com/stratadb/strata/walshard/wal"
)

// shardCut is what a fresh read takes of one shard: its generations above
// the table's watermark, and the rows of its WAL entries above the flushed
// position its state records.
type shardCut struct {
	shard   string
	state   *wal.State
	gens    []wal.Generation
	batches []arrow.RecordBatch
	keys    [][]string // of each batch: its upserts' key columns, or nil
	entries []wal.EntryNames
	held    int64 // reserved of the read's Hold for batches
}

// release lets go of the cut's rows and gives back their reservation.
func (c *shardCut) release(hold table.Memory) {
	fragment.ReleaseAll(c.batches)
	c.keys = nil
	if hold != nil && c.held > 0 {
		hold.Release(c.held)
	}
	c.batches, c.held = nil, 0
}

// ScanFleet reads the latest version of the table and every acknowledged
// row not yet in it — each shard's generations above the table's
// watermark, and its WAL entries above its flushed position — each row
// exactly once, whoever wrote it. Rows acknowledged before the read began
// are in it.
//
// It reads each shard's newest state (a LIST and a GET), the end of its
// WAL (a LIST) and every entry above the flushed position (a GET each),
// and holds those rows in memory; the table and the generations stream as
// a scan does. A cut is consistent: a state that knew of a newer merge
// than the version read makes it read a newer version, as does a shard
// found empty (retired since) whose record in the newest version is not
// the one in the version read; a WAL entry gone from under it (its rows
// merged meanwhile) makes it read that shard again; it gives up with
// ErrFleetMoving after three tries. It reads up to
// 32 shards at once, or opts.Parallelism when that is set (1: one shard
// after another, in order, as a deterministic simulation needs).
//
// With opts.Hold set, the rows of each WAL entry are reserved from it as
// the entry is decoded (its rows' bytes; not the object while it
// decodes) and given back when the read ends; a refusal fails the read.
// The table and the generations reserve from opts.Memory as a scan does.
func ScanFleet(ctx context.Context, b blob.Bucket, opts table.ScanOptions) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		opts.WithRowAddress = false
		shardsAtOnce := 32
		if opts.Parallelism > 0 {
			shardsAtOnce = opts.Parallelism
		}
		base, cuts, err := fleetCut(ctx, b, shardsAtOnce, opts.Hold)
		if err != nil {
			yield(nil, err)
			return
		}
		var gens []wal.Generation
		var batches []arrow.RecordBatch
		var keys [][]string
		var entries []wal.EntryNames
		for _, c := range cuts {
			for _, e := range c.entries {
				e.First += len(batches)
				entries = append(entries, e)
			}
			gens = append(gens, c.gens...)
			batches = append(batches, c.batches...)
			keys = append(keys, c.keys...)
		}
		defer func() {
			for _, c := range cuts {
				c.release(opts.Hold)
			}
		}()
		wal.ScanFresh(ctx, b, base.Manifest().Schema(), base, gens, batches, keys, entries, opts, yield)
	}
}

// fleetCut reads a version of the table and a cut of every shard
// consistent with it, cutting up to shardsAtOnce shards at once.
func fleetCut(ctx context.Context, b blob.Bucket, shardsAtOnce int, hold table.Memory) (*table.Snapshot, []*shardCut, error) {
	for range 3 {
		// The registrations before the version: an adopter retires a
		// shard it emptied only after its merge landed, so a shard
		// missing from this listing has its rows in the version read
		// next. Listed after the version, a shard adopted in between
		// would be in neither.
		registered, err := fleetmerge.Registered(ctx, b)
		if err != nil {
			return nil, nil, err
		}
		base, err := table.Open(ctx, b, nil)
		if err != nil {
			return nil, nil, err
		}
		m := base.Manifest()
		ids := shardsOf(m, registered)
		cuts := make([]*shardCut, len(ids))
		var stale atomic.Bool
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(shardsAtOnce)
		for i, id := range ids {
			g.Go(func() error {
				c, err := cutShard(gctx, b, id, m.Schema(), m.Shards[id].Watermark, hold)
				if errors.Is(err, wal.ErrStaleBase) {
					stale.Store(true)
					return nil
				}
				cuts[i] = c
				return err
			})
		}
		err = g.Wait()
		moved := stale.Load()
		if err == nil && !moved {
			moved, err = goneSince(ctx, b, m, cuts)
		}
		if err == nil && !moved {
			return base, cuts, nil
		}
		for _, c := range cuts {
			if c != nil {
				c.release(hold)
			}
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return nil, nil, ErrFleetMoving
}

// goneSince tells whether a shard cut as empty — no state, no WAL entry:
// new, or retired — has a record in the table's newest version other than
// in m, the version the cut read. A collection retires a shard once its
// rows are in the table, then deletes its states: the rows a merge took
// after the version read would be in neither. The newest version is read
// only when a cut is empty.
func goneSince(ctx context.Context, b blob.Bucket, m *format.Manifest, cuts []*shardCut) (bool, error) {
	var empty []string
	for _, c := range cuts {
		if c.state.Seq == 0 && len(c.gens) == 0 && len(c.batches) == 0 {
			empty = append(empty, c.shard)
		}
	}
	if len(empty) == 0 {
		return false, nil
	}
	latest, err := table.Open(ctx, b, nil)
	if err != nil {
		return false, err
	}
	if latest.Version() == m.Version {
		return false, nil
	}
	newest := latest.Manifest().Shards
	for _, id := range empty {
		if newest[id] != m.Shards[id] {
			return true, nil
		}
	}
	return false, nil
}

// cutShard reads one shard's cut against a table watermark, reserving
// its rows from hold (when not nil).
func cutShard(ctx context.Context, b blob.Bucket, id string, schema *arrow.Schema, watermark uint64, hold table.Memory) (*shardCut, error) {
	s := &Shard{b: b, l: wal.NewLayout(id), id: id, schema: schema}
	var c *shardCut
	err := s.readUnflushed(ctx, hold, func(st *wal.State) error {
		if c != nil {
			c.release(hold)
		}
		c = nil
		if st.MergedBelow > watermark {
			return wal.ErrStaleBase
		}
		c = &shardCut{shard: id, state: st, gens: st.Pending(watermark)}
		return nil
	}, func(e *wal.Entry, err error) error {
		switch {
		case errors.Is(err, wal.ErrPoisonEntry):
			// its owner quarantines it; its rows were never good
		case err != nil:
			return err
		case e.Kind == wal.KindData:
			if len(e.Appends) > 0 {
				c.entries = append(c.entries, wal.EntryNames{First: len(c.batches), N: len(e.Batches), Appends: e.Appends})
			}
			c.batches = append(c.batches, e.Batches...)
			for range e.Batches {
				c.keys = append(c.keys, e.Keys)
			}
			if hold != nil {
				var n int64
				for _, rec := range e.Batches {
					n += wal.RecordBytes(rec)
				}
				if err := hold.Reserve(ctx, n); err != nil {
					return err
				}
				c.held += n
			}
		}
		return nil
	})
	if err != nil {
		if c != nil {
			c.release(hold)
		}
		return nil, err
	}
	return c, nil
}

// readUnflushed reads, by name and in full, each WAL entry between the
// shard's flushed position and the end of its log, for each (its entry,
// or the error reading it), after start is told of the newest state; an
// error from either stops the read. A position found empty was merged and
// cleaned since the state was read — but then a flush wrote the state
// after it first: the read starts over (with start told again), three
// times at most (ErrFleetMoving). With no such state (read by name: a
// listing may lag) the entry is lost: each gets a *MissingEntryError.
//
// With hold set, twice an entry's object is reserved from it while the
// entry is decoded and each is told of it: the object, and the copy of
// its payload the decoder reads (the rows it decodes to are each's to
// count).
func (s *Shard) readUnflushed(ctx context.Context, hold table.Memory, start func(*wal.State) error, each func(e *wal.Entry, err error) error) error {
	for range 3 {
		// The log's end before the state: a flush that lands in between
		// writes its state before it cleans up the entries it flushed, so
		// the state read next lists their rows. Listed after the state,
		// the end could miss entries a flush and a merge took meanwhile,
		// and their rows would be in neither (simulation seed 46842).
		end, err := s.walEnd(ctx)
		if err != nil {
			return err
		}
		st, err := wal.ReadState(ctx, s.b, s.l)
		if err != nil {
			return err
		}
		if err := start(st); err != nil {
			return err
		}
		if plant.On(plant.FleetReadSkipsTheNewestEntry) && end > st.WALFlushed {
			end--
		}
		moved := false
		for pos := st.WALFlushed + 1; pos <= end && !moved; pos++ {
			e, decoding, err := s.readEntryHeld(ctx, pos, hold)
			if errors.Is(err, blob.ErrNotFound) {
				var serr error
				if moved, serr = s.stateAfter(ctx, st.Seq); moved {
					break
				}
				if serr != nil {
					return serr
				}
				err = &MissingEntryError{Shard: s.id, Position: pos, Key: s.l.WalKey(pos), End: end}
			}
			err = each(e, err)
			if decoding > 0 {
				hold.Release(decoding)
			}
			if err != nil {
				return err
			}
		}
		if !moved {
			return nil
		}
	}
	return fmt.Errorf("%w (shard %q)", ErrFleetMoving, s.id)
}

// readEntryHeld reads the data entry at pos, reserving from hold (when
// not nil) twice its object while it decodes: what it reserved, which
// the caller releases.
func (s *Shard) readEntryHeld(ctx context.Context, pos uint64, hold table.Memory) (*wal.Entry, int64, error) {
	if hold == nil {
		e, err := s.readEntry(ctx, pos, false)
		return e, 0, err
	}
	key := s.l.WalKey(pos)
	data, err := s.b.Get(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	n := 2 * int64(len(data))
	if err := hold.Reserve(ctx, n); err != nil {
		return nil, 0, err
	}
	e, err := wal.DecodeEntry(s.id, key, pos, data, s.schema, false)
	return e, n, err
}

// stateAfter tells whether a state newer than seq is there, read by name:
// a flush object, or a state under state/ of an older build.
func (s *Shard) stateAfter(ctx context.Context, seq uint64) (bool, error) {
	for _, key := range []string{s.l.FlushKey(seq + 1), s.l.StateKey(seq + 1)} {
		_, err := s.b.Attributes(ctx, key)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, blob.ErrNotFound) {
			return false, err
		}
	}
	return false, nil
}
