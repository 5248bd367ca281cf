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
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/internal/backoff"
	"github.com/stratadb/strata/table"
)

// walRetry paces the re-reads of a WAL position whose create's outcome
// is unknown.
var walRetry = backoff.Policy{Base: 5 * time.Millisecond, Max: 200 * time.Millisecond}

// Options configure a shard handle. Zero values mean defaults.
type Options struct {
	// Shard is the shard id, chosen by the caller (a pod name, say).
	Shard string
	// GroupBytes bounds one WAL entry (default 8 MiB); GroupWait is how
	// long the writer waits to gather concurrent appends into one entry
	// (default 2ms).
	GroupBytes int64
	GroupWait  time.Duration
	// FlushBytes and FlushRows: the memtable is flushed in the background
	// when it passes either (defaults 64 MiB, no row bound). FlushInterval
	// also flushes a non-empty memtable that old (0: never).
	FlushBytes    int64
	FlushRows     int64
	FlushInterval time.Duration
	// ReuseBytes, when above 0, writes data entries as Parquet fragments,
	// and a flush adds each entry of at least that many bytes to the
	// table as it is, rather than writing its rows a second time into the
	// generation's object: the rows cross to the store once. Smaller
	// entries are gathered into the generation's object as usual (each
	// reused entry is one more fragment until compaction folds it).
	// Default 0: off, and entries are written in the binary form that
	// builds before this option read. Turn it on only once every process
	// that replays or merges the table's shards (workers, servers, the
	// compactor Job) runs a build that has it.
	ReuseBytes int64
	// MaxMemtableBytes: appends wait while the memtable holds more
	// (default 256 MiB). MaxPendingGenerations: flushes wait while more
	// generations await merging (default 64).
	MaxMemtableBytes      int64
	MaxPendingGenerations int
	// MergeInterval merges in the background that often (0: never: a
	// compactor Job's fleet merge takes the generations). With FleetMerge
	// each of those merges is a fleet merge (walshard.FleetMerge): every
	// shard's flushed generations, not only this one's.
	// MergeMaxGenerations and MergeMaxBytes cap one merge pass (defaults
	// 64 and 1 GiB).
	FleetMerge          bool
	MergeInterval       time.Duration
	MergeMaxGenerations int
	MergeMaxBytes       int64
	// ResolveWithin: how long an append whose WAL create got no answer
	// goes on learning whether its entry landed while the store does not
	// answer (reading the position again, and creating the entry again:
	// both are safe to repeat) before it fails with ErrAppendUnknown.
	// Default 10s, and never past the commit budget; negative: it fails
	// at the first unanswered read. A store that is back within it costs
	// the append time, not an unknown outcome.
	ResolveWithin time.Duration
	// Commit tunes the merge commits.
	Commit commit.Options
	// ObserveCommit, when set, is told how long each of the shard's own
	// merge commits took (catching up with others included) and how it
	// ended: metrics hang here.
	ObserveCommit func(d time.Duration, err error)
	// OnQuarantine, when set, is told of each WAL entry set aside (see
	// Quarantined): a server logs it.
	OnQuarantine func(Quarantined)
	// OnFlush and OnMerge, when set, are told of every flush and every
	// merge of the shard (the background loops' too), how long it took and
	// how it ended: a background failure is never dropped.
	OnFlush func(gen uint64, d time.Duration, err error)
	OnMerge func(res MergeResult, d time.Duration, err error)
	// SetAsideLost is for an operator's repair (strata repair --shard
	// --drop-missing), when the store lost or damaged a WAL entry and no
	// backup holds it: replay sets aside a position between the flushed
	// one and the end of the log that is empty (*MissingEntryError) or
	// holds an entry that does not decode (*CorruptEntryError) instead of
	// refusing to open. The entry's rows are lost. Its position gets a
	// fence, so that the log is dense again and later opens replay past
	// it; quarantine/ keeps a copy of a damaged entry, or a note for a
	// missing one, and Quarantined records it.
	SetAsideLost bool
}

// EnsureDefaults returns a copy of o (nil: the zero Options) with every
// unset field at its default. o itself is not changed.
func (o *Options) EnsureDefaults() *Options {
	var c Options
	if o != nil {
		c = *o
	}
	c = c.withDefaults()
	return &c
}

// Validate checks the options: a valid shard id, no negative sizes or
// times, and valid commit options. (A memtable bound below FlushBytes is
// allowed: an append that finds the memtable full starts a flush itself.)
// Open calls it.
func (o *Options) Validate() error {
	if o == nil {
		return CheckShardID("")
	}
	if err := CheckShardID(o.Shard); err != nil {
		return err
	}
	if o.GroupBytes < 0 || o.GroupWait < 0 || o.FlushBytes < 0 || o.ReuseBytes < 0 || o.FlushRows < 0 || o.FlushInterval < 0 || o.MaxMemtableBytes < 0 ||
		o.MaxPendingGenerations < 0 || o.MergeInterval < 0 || o.MergeMaxGenerations < 0 || o.MergeMaxBytes < 0 {
		return fmt.Errorf("%w: sizes, counts and intervals must not be negative", ErrInvalidOptions)
	}
	if err := o.Commit.Validate(); err != nil {
		return fmt.Errorf("walshard: Commit: %w", err)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.GroupBytes <= 0 {
		o.GroupBytes = 8 << 20
	}
	if o.GroupWait <= 0 {
		o.GroupWait = 2 * time.Millisecond
	}
	if o.FlushBytes <= 0 {
		o.FlushBytes = 64 << 20
	}
	if o.MaxMemtableBytes <= 0 {
		o.MaxMemtableBytes = 256 << 20
	}
	if o.MaxPendingGenerations <= 0 {
		o.MaxPendingGenerations = 64
	}
	if o.MergeMaxGenerations <= 0 {
		o.MergeMaxGenerations = 64
	}
	if o.MergeMaxBytes <= 0 {
		o.MergeMaxBytes = 1 << 30
	}
	if o.ResolveWithin == 0 {
		o.ResolveWithin = 10 * time.Second
	}
	if o.Commit.Writer == "" {
		o.Commit.Writer = "shard:" + o.Shard
	}
	if o.Commit.Now == nil {
		o.Commit.Now = time.Now
	}
	return o
}

type memEntry struct {
	pos     uint64
	batches []arrow.RecordBatch
	rows    int64
	bytes   int64
	// reuse: the entry's own object as a fragment, when it is one this
	// handle wrote of at least ReuseBytes.
	reuse *table.Fragment
}

type appendReq struct {
	recs []arrow.RecordBatch // one request's batches go in one entry
	key  *table.AppendKey    // an idempotent append's name, or nil
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
	l      layout
	id     string
	epoch  uint64
	schema *arrow.Schema
	opts   Options

	appendq chan appendReq
	stop    chan struct{}
	wg      sync.WaitGroup
	flushq  chan struct{} // non-blocking trigger
	flushMu sync.Mutex    // serialises flushes
	merging atomic.Bool
	// merges counts the merge commits this handle made; rebases the times
	// they caught up with other commits first.
	merges, rebases atomic.Int64

	mu struct {
		sync.Mutex
		nextPos   uint64
		mem       []memEntry
		memRows   int64
		memBytes  int64
		memSince  time.Time // when the oldest memtable entry landed
		state     *State
		watermark uint64 // newest table watermark this handle saw
		version   uint64 // the table version it was seen in
		cleaned   uint64 // the watermark the WAL and states were cleaned up to
		uncertain uint64 // a WAL position an attempt may have landed at unseen
		// uncertainIDs: the entry ids of the attempts there, by which the
		// shard knows the entry as its own if it finds it later.
		uncertainIDs []string
		// verified: when this handle last knew (reading the claims, or
		// claiming) that no newer epoch was claimed: see epochRecheck.
		verified    time.Time
		fenced      error
		closed      bool
		quarantined []Quarantined
		// producers records the idempotent appends of entries that
		// landed (see State.Producers); inflight, the names being
		// written, each with a channel closed when its write ends.
		producers table.Producers
		inflight  map[appendName]chan struct{}
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
	s := &Shard{b: b, l: newLayout(opts.Shard), id: opts.Shard, schema: m.Schema(), opts: opts,
		appendq: make(chan appendReq), stop: make(chan struct{}), flushq: make(chan struct{}, 1)}
	s.mu.watermark, s.mu.version = m.Shards[opts.Shard].Watermark, m.Version
	s.mu.changed = make(chan struct{})
	claimed := s.now()
	if s.epoch, err = s.claimEpoch(ctx); err != nil {
		return nil, err
	}
	s.mu.verified = claimed
	// Other processes (fleet merges, adoption, fresh reads) find the
	// shard by this.
	if err := b.PutIfAbsent(ctx, table.FleetShardsDir+opts.Shard, nil); err != nil && !errors.Is(err, blob.ErrExists) {
		return nil, err
	}
	// The state first: a create at the next sequence number succeeds only
	// on the newest state, whatever a lagging listing showed, so its
	// flushed position is the true one; the fence goes above it.
	state, err := s.takeOver(ctx)
	if err != nil {
		return nil, err
	}
	fencePos, err := s.fence(ctx, state.WALFlushed)
	if err != nil {
		return nil, err
	}
	s.mu.state = state
	s.mu.producers = state.Producers
	s.mu.nextPos = fencePos + 1
	if err := s.replay(ctx, state.WALFlushed, fencePos); err != nil {
		return nil, err
	}
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

func (s *Shard) claimEpoch(ctx context.Context) (uint64, error) {
	for range 100 {
		page, err := s.b.ListPage(ctx, s.l.epochs(), "", 1)
		if err != nil {
			return 0, err
		}
		next := uint64(1)
		if len(page.Objects) > 0 {
			e, ok := parseLast(s.l.epochs(), page.Objects[0].Key)
			if !ok {
				return 0, fmt.Errorf("walshard: unexpected object %q among epochs", page.Objects[0].Key)
			}
			next = e + 1
		}
		err = s.b.PutIfAbsent(ctx, s.l.epochKey(next), []byte(s.opts.Commit.Writer))
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
	page, err := s.b.ListPage(ctx, s.l.wal(), "", 1)
	if err != nil || len(page.Objects) == 0 {
		return 0, err
	}
	pos, ok := parseLast(s.l.wal(), page.Objects[0].Key)
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
		e := &entry{kind: kindFence, epoch: s.epoch, position: pos, id: table.NewID()}
		data, _ := encodeEntry(e, s.schema, false)
		err := s.b.PutIfAbsent(ctx, s.l.walKey(pos), data)
		if err == nil {
			return pos, nil
		}
		if errors.Is(err, blob.ErrExists) || blob.IsRetryable(err) {
			if got, rerr := s.readEntry(ctx, pos, true); rerr == nil && got.id == e.id {
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
// number, so that the old owner's next state write fails.
func (s *Shard) takeOver(ctx context.Context) (*State, error) {
	for range 100 {
		cur, err := readState(ctx, s.b, s.l)
		if err != nil {
			return nil, err
		}
		if cur.Epoch > s.epoch {
			return nil, ErrFenced
		}
		next := *cur
		next.Seq, next.Epoch, next.ID = cur.Seq+1, s.epoch, table.NewID()
		err = writeState(ctx, s.b, s.l, &next)
		if err == nil {
			return &next, nil
		}
		if !errors.Is(err, errStateTaken) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("walshard: shard %q: could not take over the state", s.id)
}

func (s *Shard) readEntry(ctx context.Context, pos uint64, headerOnly bool) (*entry, error) {
	key := s.l.walKey(pos)
	data, err := s.b.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return decodeEntry(s.id, key, pos, data, s.schema, headerOnly)
}

// replay reads the data entries in (from, to) into the memtable.
//
// It reads every position by name rather than listing the WAL: positions
// above the flushed one are dense (a writer moves to the next position
// only once an entry has landed, and the fence took the first free one),
// and a listing may not show an entry created a moment ago on a store
// whose listings lag behind its writes, while a read by name does. So a
// missing position is a lost entry: a *MissingEntryError. An entry whose
// rows the table cannot take is quarantined (see quarantine) and skipped.
func (s *Shard) replay(ctx context.Context, from, to uint64) error {
	for pos := from + 1; pos < to; pos++ {
		err := s.replayEntry(ctx, pos)
		if errors.Is(err, blob.ErrNotFound) {
			err = &MissingEntryError{Shard: s.id, Position: pos, Key: s.l.walKey(pos), End: to}
		}
		if err != nil && s.opts.SetAsideLost && (errors.Is(err, ErrMissingEntry) || errors.Is(err, ErrCorruptEntry)) {
			err = s.setAside(ctx, pos, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// setAside gives up the entry at pos, missing or damaged (lost, its
// cause), for an operator's repair (Options.SetAsideLost): quarantine/
// gets a copy of what is there, or a note that nothing was, and the
// position a fence of this epoch. Only this owner writes below its fence,
// so nothing else can take the position meanwhile.
func (s *Shard) setAside(ctx context.Context, pos uint64, lost error) error {
	key := s.l.walKey(pos)
	data, err := s.b.Get(ctx, key)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		data = []byte(fmt.Sprintf("strata: WAL entry %s was missing when a repair set it aside at %s; its rows are lost\n", key, time.Now().UTC().Format(time.RFC3339)))
	case err != nil:
		return err
	}
	qkey, err := s.keepAside(ctx, pos, data)
	if err != nil {
		return err
	}
	if err := s.b.Delete(ctx, key); err != nil && !errors.Is(err, blob.ErrNotFound) {
		return fmt.Errorf("walshard: shard %q: setting aside WAL entry %d: %w", s.id, pos, err)
	}
	fence, _ := encodeEntry(&entry{kind: kindFence, epoch: s.epoch, position: pos, id: table.NewID()}, s.schema, false)
	if err := s.b.PutIfAbsent(ctx, key, fence); err != nil {
		// There already: a fence from an attempt of ours whose answer was
		// lost will do; anything else is not ours to overwrite.
		if e, rerr := s.readEntry(ctx, pos, true); !errors.Is(err, blob.ErrExists) || rerr != nil || e.kind != kindFence {
			return fmt.Errorf("walshard: shard %q: fencing set-aside WAL position %d: %w", s.id, pos, err)
		}
	}
	why := "the entry was missing"
	var ce *CorruptEntryError
	if errors.As(lost, &ce) {
		why = "the entry was corrupt: " + ce.Reason
	}
	s.recordAside(Quarantined{Position: pos, Key: qkey, Reason: "set aside by a repair, its rows lost: " + why})
	return nil
}

// replayEntry reads the WAL entry at pos and adds its rows to the
// memtable, or quarantines it when they cannot go into a generation.
func (s *Shard) replayEntry(ctx context.Context, pos uint64) error {
	e, err := s.readEntry(ctx, pos, false)
	var poison *PoisonEntryError
	switch {
	case errors.As(err, &poison):
		return s.quarantine(ctx, pos, poison.Reason)
	case err != nil:
		return err
	case e.kind == kindData:
		s.addToMemtable(pos, e.batches, nil, e.appends)
	}
	return nil
}

// Quarantined is a WAL entry set aside: its rows could not go into a
// generation. The entry's object is kept under quarantine/ for an operator;
// the shard goes on with its other rows.
type Quarantined struct {
	Position uint64 `json:"position"`
	Key      string `json:"key"` // the copy under quarantine/
	Reason   string `json:"reason"`
}

// quarantine copies the WAL entry at pos under quarantine/ (where nothing
// deletes it) and records it; the caller leaves its rows out.
func (s *Shard) quarantine(ctx context.Context, pos uint64, reason string) error {
	data, err := s.b.Get(ctx, s.l.walKey(pos))
	if err != nil {
		return fmt.Errorf("walshard: shard %q: quarantining WAL entry %d: %w", s.id, pos, err)
	}
	key, err := s.keepAside(ctx, pos, data)
	if err != nil {
		return err
	}
	s.recordAside(Quarantined{Position: pos, Key: key, Reason: reason})
	return nil
}

// keepAside stores data under quarantine/ for position pos and returns
// its key; a copy there already (an earlier attempt's) stays.
func (s *Shard) keepAside(ctx context.Context, pos uint64, data []byte) (string, error) {
	key := s.l.quarantineKey(pos)
	if err := s.b.PutIfAbsent(ctx, key, data); err != nil && !errors.Is(err, blob.ErrExists) {
		return "", fmt.Errorf("walshard: shard %q: quarantining WAL entry %d: %w", s.id, pos, err)
	}
	return key, nil
}

// recordAside records an entry set aside, in the stats and to OnQuarantine.
func (s *Shard) recordAside(q Quarantined) {
	s.mu.Lock()
	s.mu.quarantined = append(s.mu.quarantined, q)
	s.mu.Unlock()
	if s.opts.OnQuarantine != nil {
		s.opts.OnQuarantine(q)
	}
}

// addToMemtable adds an entry's rows, and records its idempotent
// appends; reuse, when not nil, is the entry's object as a fragment, to
// join the table as it is when flushed.
func (s *Shard) addToMemtable(pos uint64, batches []arrow.RecordBatch, reuse *table.Fragment, appends []appendRecord) {
	me := memEntry{pos: pos, batches: batches, reuse: reuse}
	for _, rec := range batches {
		me.rows += rec.NumRows()
		me.bytes += recordBytes(rec)
	}
	s.mu.Lock()
	for _, a := range appends {
		s.mu.producers = s.mu.producers.Record(a.AppendKey, pos, a.Rows)
	}
	if len(s.mu.mem) == 0 {
		s.mu.memSince = time.Now()
	}
	s.mu.mem = append(s.mu.mem, me)
	s.mu.memRows += me.rows
	s.mu.memBytes += me.bytes
	over := s.mu.memBytes >= s.opts.FlushBytes || (s.opts.FlushRows > 0 && s.mu.memRows >= s.opts.FlushRows)
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
func (s *Shard) Fenced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.fenced != nil
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
// between a cleaner's clock and the store's.
const (
	epochRecheck = 30 * time.Second
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
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, me := range s.mu.mem {
		for _, rec := range me.batches {
			rec.Release()
		}
	}
	s.mu.mem = nil
	return nil
}
