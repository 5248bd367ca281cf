package walshard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/internal/backoff"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard/fleetmerge"
	"github.com/stratadb/strata/walshard/wal"
)

// walRetry paces the re-reads of a WAL position whose create's outcome
// is unknown.
var walRetry = backoff.Policy{Base: 5 * time.Millisecond, Max: 200 * time.Millisecond}

type appendReq struct {
	recs []arrow.RecordBatch // one request's batches go in one entry
	key  *format.AppendKey   // an idempotent append's name, or nil
	// keys: an upsert's key columns (stored names); requests go in one
	// entry only with the same keys (none, for appends).
	keys []string
	rows int64
	done chan Ack
}

// Ack is what an append learns: the WAL position that holds its rows,
// or, for an idempotent append sent again, the first one's (Duplicate,
// and nothing was stored this time).
type Ack struct {
	Position  uint64
	Rows      int64
	Duplicate bool
	err       error
}

// Shard is one owner's handle on a shard. Safe for concurrent use.
type Shard struct {
	b      blob.Bucket
	l      wal.Layout
	id     string
	epoch  uint64
	schema *arrow.Schema
	opts   Options

	appendq chan appendReq
	// stop is closed, and ctx canceled, by Close: the handle's loops
	// (writeLoop, flushLoop, mergeLoop) end with them, and wg waits.
	ctx     context.Context
	cancel  context.CancelFunc
	stop    chan struct{}
	wg      sync.WaitGroup
	flushq  chan struct{} // non-blocking trigger
	flushMu sync.Mutex    // serialises flushes
	merging atomic.Bool
	// fleet is what this handle's fleet merges (Options.FleetMerge)
	// remember between passes.
	fleet fleetmerge.Memory
	// merges counts the merge commits this handle made; rebases the times
	// they caught up with other commits first.
	merges, rebases atomic.Int64

	// mu guards the shard's state, which falls in parts, each a type with
	// the fields it may touch: the WAL writer's positions (wal), the
	// memtable (mem), the flushed generations (gens), the names of
	// idempotent appends (names), and the handle's life. Methods of the
	// parts run with mu held.
	mu struct {
		sync.Mutex
		wal         walPositions
		mem         memtable
		gens        flushedGenerations
		names       appendNames
		fenced      error
		closed      bool
		quarantined []Quarantined
		// changed is closed (and replaced) whenever something a waiter
		// waits for may have happened: the memtable shrank, the watermark
		// moved, a merge ended, the handle was fenced.
		changed chan struct{}
	}
}

// changedLocked returns the channel the next change closes; take it under
// the same lock as the check it guards, so no change is missed.
func (s *Shard) changedLocked() <-chan struct{} { return s.mu.changed }

// broadcastLocked wakes everything waiting on a change.
func (s *Shard) broadcastLocked() {
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
}

// Open claims a new epoch of the shard, fences any earlier owner, and
// replays the WAL entries not yet flushed into the memtable.
func Open(ctx context.Context, b blob.Bucket, o *Options) (*Shard, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	opts := *o.EnsureDefaults()
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		return nil, err
	}
	if err := m.CheckWritable(); err != nil {
		return nil, err
	}
	l := wal.NewLayout(opts.Shard)
	l.Table = m.TableID
	s := &Shard{b: b, l: l, id: opts.Shard, schema: m.Schema(), opts: opts,
		appendq: make(chan appendReq), stop: make(chan struct{}), flushq: make(chan struct{}, 1)}
	// What the table records of the shard is a floor for the epoch and
	// the positions: a shard whose objects garbage collection retired
	// (compactor.GCPolicy.RetireShardsAfter) opens again above them, so
	// that an old owner stays fenced and no new generation is taken for
	// one already merged.
	rec := m.Shards[opts.Shard]
	s.mu.gens.watermark, s.mu.gens.version = rec.Watermark, m.Version
	s.mu.changed = make(chan struct{})
	claimed := s.now()
	// The table just read is as good as the shard's merge record: the
	// first flush need not read that.
	s.mu.gens.learnedAt = claimed
	if s.epoch, err = s.claimEpoch(ctx, rec.Epoch); err != nil {
		return nil, err
	}
	s.mu.wal.verified, s.mu.wal.wrote = claimed, claimed
	// Other processes (fleet merges, adoption, fresh reads) find the
	// shard by this.
	if err := b.PutIfAbsent(ctx, format.FleetShardsDir+opts.Shard, nil); err != nil && !errors.Is(err, blob.ErrExists) {
		return nil, err
	}
	// The state first: a create at the next sequence number succeeds only
	// on the newest state, whatever a lagging listing showed, so its
	// flushed position is the true one; the fence goes above it.
	state, err := s.takeOver(ctx, m)
	if err != nil {
		return nil, err
	}
	fencePos, err := s.fence(ctx, state.WALFlushed)
	if err != nil {
		return nil, err
	}
	s.mu.gens.state = state
	s.mu.names.producers = state.Producers
	s.mu.wal.nextPos = fencePos + 1
	// A newer owner that claimed its epoch while this one opened may have
	// placed its fence below this one's (it listed the WAL first), where
	// no write of this handle meets it: the claims are read again now
	// that this fence is in. A newer epoch claimed after this read lists
	// the WAL after this fence landed, and fences above it.
	if err := s.checkEpoch(ctx); err != nil {
		return nil, err
	}
	if err := s.replay(ctx, state.WALFlushed, fencePos); err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Go(s.writeLoop)
	s.wg.Go(s.flushLoop)
	if opts.MergeInterval > 0 {
		s.wg.Go(s.mergeLoop)
	}
	return s, nil
}

// ID returns the shard id; Epoch the epoch this handle owns.
func (s *Shard) ID() string            { return s.id }
func (s *Shard) Epoch() uint64         { return s.epoch }
func (s *Shard) Schema() *arrow.Schema { return s.schema }

// claimEpoch claims the epoch after the newest claimed and after floor
// (the table's record of the shard).
func (s *Shard) claimEpoch(ctx context.Context, floor uint64) (uint64, error) {
	for range 100 {
		page, err := s.b.ListPage(ctx, s.l.Epochs(), "", 1)
		if err != nil {
			return 0, err
		}
		next := floor + 1
		if len(page.Objects) > 0 {
			e, ok := wal.ParseLast(s.l.Epochs(), page.Objects[0].Key)
			if !ok {
				return 0, fmt.Errorf("walshard: unexpected object %q among epochs", page.Objects[0].Key)
			}
			next = max(next, e+1)
		}
		err = s.b.PutIfAbsent(ctx, s.l.EpochKey(next), []byte(s.opts.Commit.Writer))
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, blob.ErrExists) {
			return 0, err
		}
	}
	return 0, fmt.Errorf("walshard: shard %q: could not claim an epoch", s.id)
}

// walEnd returns the newest WAL position in the bucket (0: none).
func (s *Shard) walEnd(ctx context.Context) (uint64, error) {
	page, err := s.b.ListPage(ctx, s.l.WAL(), "", 1)
	if err != nil || len(page.Objects) == 0 {
		return 0, err
	}
	pos, ok := wal.ParseLast(s.l.WAL(), page.Objects[0].Key)
	if !ok {
		return 0, fmt.Errorf("walshard: unexpected object %q in the WAL", page.Objects[0].Key)
	}
	return pos, nil
}

// fence writes a fence entry at the first free WAL position above both
// the listed end and the flushed position (of the state this owner took
// over), and returns it. Positions above the flushed one are dense (cleanup
// deletes only entries at or below it), so the first free one is where the
// old owner writes next, even when the listing missed its newest entries.
func (s *Shard) fence(ctx context.Context, flushed uint64) (uint64, error) {
	end, err := s.walEnd(ctx)
	if err != nil {
		return 0, err
	}
	pos := max(end, flushed) + 1
	for range 1000 {
		e := &wal.Entry{Kind: wal.KindFence, Epoch: s.epoch, Position: pos, Id: format.NewID()}
		data, _ := wal.EncodeEntry(e, s.schema, false)
		err := s.b.PutIfAbsent(ctx, s.l.WalKey(pos), data)
		if err == nil {
			return pos, nil
		}
		if errors.Is(err, blob.ErrExists) || blob.IsRetryable(err) {
			if got, rerr := s.readEntry(ctx, pos, true); rerr == nil && got.Id == e.Id {
				return pos, nil
			}
			if errors.Is(err, blob.ErrExists) {
				pos++ // the old owner wrote here first; its next write meets our fence
			}
			continue
		}
		return 0, err
	}
	return 0, fmt.Errorf("walshard: shard %q: could not place a fence", s.id)
}

// takeOver writes a state object in this epoch at the next sequence
// number, so that the old owner's next state write fails. m is the table
// as Open read it: the new state's number is above what it counts as
// merged of the shard (ShardMark.Seq) too, so that a shard retired (its
// flush objects gone) and opened again does not number its states anew
// below that count. A create succeeds on the newest state, or in a
// number a fleet merge emptied (see ownerState): the table read again
// after the create, by name, then counts that number merged from an
// older owner's state, and the stray state is taken back and the
// take-over tried again above it.
func (s *Shard) takeOver(ctx context.Context, m *format.Manifest) (*wal.State, error) {
	recorded := m.Shards[s.id].Epoch
	var floor uint64
	var lastErr error
	for range 100 {
		mark := m.Shards[s.id].Seq
		cur, moved, err := wal.OwnerState(ctx, s.b, s.l, mark, floor)
		if errors.Is(err, wal.ErrStateGone) {
			lastErr = err
			if m, err = table.Newest(ctx, s.b, m); err != nil {
				return nil, err
			}
			floor = 0
			continue
		}
		if err != nil {
			return nil, err
		}
		stateless := !moved && cur.Seq == 0
		if stateless && mark > 0 {
			// No state at all, and the table counts states up to mark
			// merged: the shard was retired (its objects gone, as for
			// strays below). Its states start again above that count, so
			// that no new flush object is taken for a merged one.
			cur.Seq = mark
		}
		if cur.Epoch > s.epoch {
			return nil, ErrFenced
		}
		next := *cur
		next.Seq, next.Epoch, next.ID = cur.Seq+1, s.epoch, format.NewID()
		// Every WAL position the table's merged generations cover is
		// flushed, and the next generation is numbered above its
		// watermark: no-ops but for a retired shard, whose states are gone
		// (see Open, and format.ShardMark.WAL); a table written before
		// ShardMark.WAL has the watermark alone for a floor.
		s.mu.Lock()
		w := s.mu.gens.watermark
		s.mu.Unlock()
		next.WALFlushed, next.NextGen = max(next.WALFlushed, w, m.Shards[s.id].WAL), max(next.NextGen, w+1)
		if stateless && recorded > 0 {
			if next.WALFlushed, err = s.strays(ctx, next.WALFlushed, recorded); err != nil {
				return nil, err
			}
		}
		if !moved {
			// A shard without a flush object (new, retired, or a build
			// before flush objects wrote it): a stand-in at the next number
			// under state/ fences an owner of such a build, and such a
			// build refuses the shard from now on.
			if err := wal.MoveOldStates(ctx, s.b, s.l, &next); errors.Is(err, wal.ErrStateTaken) {
				continue
			} else if err != nil {
				return nil, err
			}
			if cur.Seq > 0 {
				s.mu.Lock()
				s.mu.gens.oldStates = true // dropOldStates deletes those below
				s.mu.Unlock()
			}
		}
		err = wal.WriteState(ctx, s.b, s.l, s.schema, &next, nil)
		if errors.Is(err, wal.ErrStateTaken) {
			lastErr, floor = err, next.Seq
			continue
		}
		if err != nil {
			return nil, err
		}
		if m, err = table.Newest(ctx, s.b, m); err != nil {
			return nil, err
		}
		if mk := m.Shards[s.id]; mk.Seq >= next.Seq && mk.Epoch < s.epoch {
			// The table counts the number merged, from an older owner's
			// state (a merge that took this one records this epoch): it
			// was one a merge had emptied, and the state is not the
			// newest's successor. Nothing reads it (the table counts it
			// merged); it goes, and the take-over starts again.
			if err := s.b.Delete(ctx, s.l.FlushKey(next.Seq)); err != nil && !errors.Is(err, blob.ErrNotFound) {
				return nil, err
			}
			lastErr, floor = fmt.Errorf("walshard: state %d was a merged number", next.Seq), 0
			continue
		}
		s.mu.Lock()
		s.mu.gens.stateAt = s.now()
		s.mu.Unlock()
		return &next, nil
	}
	return nil, fmt.Errorf("walshard: shard %q: could not take over the state: %w", s.id, lastErr)
}

// strays returns the flushed position of a shard the table records that
// has no state (garbage collection retired it): above the watermark w,
// the WAL holds only what an owner of the epoch the table records, or an
// older one, wrote after the retirement listed the shard, never
// acknowledged — the collection lists the shard again after its claim
// and retires nothing if an entry landed before it, and an owner quiet
// as long as a retired shard's reads the claims after its write and finds
// the collection's (or its own gone) if one landed after; every entry of
// an older epoch than recorded was flushed by the owner of that epoch
// before its merge. Entries of a newer epoch are an owner's that opened
// the shard again.
// When every entry there is such a one, they are passed over (the
// flushed position is the newest); otherwise it stays w and replay
// judges them.
func (s *Shard) strays(ctx context.Context, w, recorded uint64) (uint64, error) {
	end, err := s.walEnd(ctx)
	if err != nil || end <= w {
		return w, err
	}
	for pos := w + 1; pos <= end; pos++ {
		e, err := s.readEntry(ctx, pos, true)
		if errors.Is(err, blob.ErrNotFound) {
			continue
		}
		if err != nil {
			return w, err
		}
		if e.Epoch > recorded {
			return w, nil
		}
	}
	return end, nil
}

func (s *Shard) readEntry(ctx context.Context, pos uint64, headerOnly bool) (*wal.Entry, error) {
	key := s.l.WalKey(pos)
	data, err := s.b.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return wal.DecodeEntry(s.id, key, pos, data, s.schema, headerOnly)
}

// addToMemtable adds an entry's rows, and records its idempotent
// appends; reuse, when not nil, is the entry's object as a fragment, to
// join the table as it is when flushed.
func (s *Shard) addToMemtable(pos uint64, batches []arrow.RecordBatch, reuse *format.Fragment, appends []wal.AppendRecord, keys []string) {
	me := memEntry{pos: pos, batches: batches, reuse: reuse, keys: keys, appends: appends}
	for _, rec := range batches {
		me.rows += rec.NumRows()
		me.bytes += wal.RecordBytes(rec)
	}
	s.mu.Lock()
	s.mu.names.record(pos, appends)
	s.mu.mem.add(me)
	over := s.mu.mem.bytes >= s.opts.FlushBytes || (s.opts.FlushRows > 0 && s.mu.mem.rows >= s.opts.FlushRows)
	s.mu.Unlock()
	if over {
		s.triggerFlush()
	}
}

func (s *Shard) triggerFlush() {
	select {
	case s.flushq <- struct{}{}:
	default:
	}
}

func (s *Shard) fencedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return ErrClosed
	}
	return s.mu.fenced
}

// Fenced tells whether a newer owner took the shard over: the handle
// appends, flushes and merges no more (each fails with ErrFenced), and the
// rows it acknowledged are in the WAL, for the newer owner to replay.
func (s *Shard) Fenced() bool { return s.FencedBy() != nil }

// FencedBy is why the handle was fenced (nil: it was not): ErrFenced for
// a newer owner, ErrDropped (which is ErrFenced too) for a drop of the
// table.
func (s *Shard) FencedBy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.fenced
}

func (s *Shard) setFenced() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.fenced == nil {
		s.mu.fenced = fmt.Errorf("%w (shard %q, epoch %d)", ErrFenced, s.id, s.epoch)
		s.broadcastLocked()
	}
	return s.mu.fenced
}

// A newer owner's fence is what makes an older owner's next WAL write
// fail: it sits at the first free position, where the older owner writes
// next. Once merged, WAL entries are deleted — and so would the fence be,
// leaving its position free for an older owner that was paused (a frozen
// process, a partition) to write at and be acknowledged for rows nobody
// replays. So a fence is kept fenceKeep after it is written, and a writer
// acknowledges an entry without reading the claims only within
// epochRecheck of when it last knew it held the newest epoch: later, it
// reads them first (one LIST of one key). A newer epoch claimed before an
// entry lands is then either seen by that read or claimed within
// epochRecheck of the write, and its fence, younger than fenceKeep, is
// still there to collide with. fenceKeep leaves minutes for the skew
// between a cleaner's clock and the store's. A read a minute is one
// request a shard-minute at most, of an owner that appends all along.
const (
	epochRecheck = time.Minute
	fenceKeep    = 5 * time.Minute
)

// checkEpochRetrying is checkEpoch, tried again after a transient
// failure until deadline.
func (s *Shard) checkEpochRetrying(ctx context.Context, deadline time.Time) error {
	for attempt := 1; ; attempt++ {
		err := s.checkEpoch(ctx)
		if err == nil || errors.Is(err, ErrFenced) || !blob.IsRetryable(err) || !time.Now().Before(deadline) {
			return err
		}
		if err := backoff.Sleep(ctx, walRetry.Delay(attempt)); err != nil {
			return err
		}
	}
}

// now is the handle's clock (Commit.Now; default time.Now).
func (s *Shard) now() time.Time { return s.opts.Commit.Now() }

func (s *Shard) budget() time.Duration {
	if s.opts.Commit.Budget > 0 {
		return s.opts.Commit.Budget
	}
	return 30 * time.Second
}

// Close stops the handle's background work. Appends not yet acknowledged
// fail with ErrClosed; acknowledged rows are durable in the WAL whether or
// not they were flushed.
func (s *Shard) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.mu.Unlock()
	close(s.stop)
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.mem.release()
	return nil
}
