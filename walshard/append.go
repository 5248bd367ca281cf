package walshard

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/internal/backoff"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/walshard/wal"
)

// Append makes recs durable in the shard's WAL and adds them to the
// memtable. It returns once one WAL entry holding all of recs is in the
// bucket: either every row is acknowledged, or (on error) none is, though
// an entry whose create timed out may still land — its rows are then
// stored once, as the handle's next append or a reopening finds the entry
// and takes it in. Each batch first passes
// evolve.Conform (valid data, the table's schema or one that converts
// without loss, no null where the schema forbids one); a batch that does
// not is refused before anything is written. When the memtable is over
// its bound, Append waits for a flush.
func (s *Shard) Append(ctx context.Context, recs ...arrow.RecordBatch) error {
	_, err := s.append(ctx, nil, nil, recs, false)
	return err
}

// AppendConformed is Append (AppendOnce when key is not nil) of batches
// that passed evolve.Conform against Schema() already — read by package
// ingest, say — so that an append is checked once: they are taken as
// they are.
func (s *Shard) AppendConformed(ctx context.Context, key *format.Idempotency, recs ...arrow.RecordBatch) (Ack, error) {
	if key != nil {
		if err := key.Check(); err != nil {
			return Ack{}, err
		}
	}
	return s.append(ctx, key, nil, recs, true)
}

// AppendOnce is Append named by key, safe to call again with the same key
// after any error, through this handle or a later owner of the shard
// (after a restart or an adoption): an append whose name the shard
// records (its entry landed) stores nothing and answers the first one's
// WAL position, with Ack.Duplicate set; one still being written is waited
// for. The same name with other rows fails with format.ErrKeyReused. The
// shard keeps the names in its WAL entries and its state (see
// format.Idempotency for the window); a name is the shard's alone, so a
// retry must go to the same shard.
func (s *Shard) AppendOnce(ctx context.Context, key format.Idempotency, recs ...arrow.RecordBatch) (Ack, error) {
	if err := key.Check(); err != nil {
		return Ack{}, err
	}
	return s.append(ctx, &key, nil, recs, false)
}

// appendName is an idempotent append's name, as the in-flight set keys it.
type appendName struct {
	producer string
	seq      uint64
}

// Upsert is Append of rows that replace, when a merge installs them,
// every row of the table with one of their keys (their values in the
// columns keys), as commit.Table.Upsert's do: a key must not be null nor
// appear twice among recs, and float columns cannot be keys
// (table.NewKeySet; each a *evolve.InputError). The rows are acknowledged
// once durable in a WAL entry of upserts (requests with the same keys
// only). The order that decides a key's row: a shard's upserts in the
// order of their WAL entries (a later one replaces an earlier one of
// the same key when they are flushed together), a shard's generations in
// order, and across shards and direct upserts, the order in which merges
// and upserts commit: a key's row is that of the upsert installed last.
// A fresh read (ScanFresh, ScanFleet) shows one row per key too: an
// upsert not yet merged hides the rows with its keys.
func (s *Shard) Upsert(ctx context.Context, keys []string, recs ...arrow.RecordBatch) error {
	_, err := s.append(ctx, nil, keys, recs, false)
	return err
}

// UpsertOnce is Upsert named by key, safe to call again with the same key
// after any error, as AppendOnce is; key nil makes it Upsert. With
// conformed, recs passed evolve.Conform against Schema() already, as
// AppendConformed's.
func (s *Shard) UpsertOnce(ctx context.Context, key *format.Idempotency, keys []string, conformed bool, recs ...arrow.RecordBatch) (Ack, error) {
	if key != nil {
		if err := key.Check(); err != nil {
			return Ack{}, err
		}
	}
	return s.append(ctx, key, keys, recs, conformed)
}

func (s *Shard) append(ctx context.Context, key *format.Idempotency, keys []string, recs []arrow.RecordBatch, conformed bool) (Ack, error) {
	if keys != nil && len(keys) == 0 {
		return Ack{}, &evolve.InputError{Row: -1, Reason: "an upsert needs at least one key column"}
	}
	batches := make([]arrow.RecordBatch, 0, len(recs))
	var base int64
	for _, rec := range recs {
		c := rec
		if conformed {
			rec.Retain()
		} else {
			var err error
			if c, err = evolve.Conform(s.schema, rec, evolve.ConformOptions{RowBase: base}); err != nil {
				fragment.ReleaseAll(batches)
				return Ack{}, err
			}
		}
		base += rec.NumRows()
		batches = append(batches, c)
	}
	if len(batches) == 0 {
		return Ack{}, nil
	}
	req := appendReq{recs: batches, rows: base, done: make(chan Ack, 1)}
	if keys != nil {
		if _, err := table.NewKeySet(s.schema, keys, batches); err != nil {
			fragment.ReleaseAll(batches)
			return Ack{}, err
		}
		req.keys = evolve.StoredNames(s.schema, keys)
	}
	if key != nil {
		k, err := s.appendKey(*key, batches)
		if err != nil {
			fragment.ReleaseAll(batches)
			return Ack{}, err
		}
		if req.keys != nil {
			// An upsert's name covers its key columns too: the same name
			// for an append of the rows, or an upsert by other keys, is
			// another request (format.ErrKeyReused), not a duplicate.
			k.Digest = format.Digest(upsertDigest(uint64(k.Digest), req.keys))
		}
		ack, done, err := s.claim(ctx, k)
		if err != nil || ack.Duplicate {
			fragment.ReleaseAll(batches)
			return ack, err
		}
		defer done()
		req.key = &k
	}
	if err := s.waitForRoom(ctx); err != nil {
		fragment.ReleaseAll(batches)
		return Ack{}, err
	}
	select {
	case s.appendq <- req:
	case <-ctx.Done():
		fragment.ReleaseAll(batches)
		return Ack{}, ctx.Err()
	case <-s.stop:
		fragment.ReleaseAll(batches)
		return Ack{}, ErrClosed
	}
	select {
	case ack := <-req.done:
		return ack, ack.err
	case <-ctx.Done():
		// The entry may still land; the rows are then durable, but this
		// caller was not told so.
		return Ack{}, ctx.Err()
	}
}

// upsertDigest mixes an upsert's key columns (stored names) into its
// name's digest (never 0: 0 asks for the rows').
func upsertDigest(d uint64, keys []string) uint64 {
	h := fnv.New64a()
	h.Write([]byte("upsert"))
	for _, k := range keys {
		h.Write([]byte{0})
		h.Write([]byte(k))
	}
	return max((d^h.Sum64())*0x9e3779b97f4a7c15, 1)
}

// appendKey is key as the shard records it, with the rows' digest when
// the key names none.
func (s *Shard) appendKey(key format.Idempotency, batches []arrow.RecordBatch) (format.AppendKey, error) {
	return key.DigestRows(s.schema, batches, s.now())
}

// claim makes this call the one writing k, once no other is: it answers
// the first outcome of a name already recorded (a duplicate) or its
// error, and otherwise marks k in flight until done is called. A call
// that finds k in flight waits for that write to end, then looks again:
// the write that failed with its outcome unknown may have landed, and the
// next entry written at its position finds it (see writeGroup).
func (s *Shard) claim(ctx context.Context, k format.AppendKey) (Ack, func(), error) {
	name := appendName{k.Producer, k.Seq}
	for {
		s.mu.Lock()
		o, found, err := s.mu.names.producers.Lookup(k)
		if err != nil || found {
			s.mu.Unlock()
			return Ack{Position: o.At, Rows: o.Rows, Duplicate: found}, nil, err
		}
		busy, ok := s.mu.names.inflight[name]
		if !ok {
			if s.mu.names.inflight == nil {
				s.mu.names.inflight = map[appendName]chan struct{}{}
			}
			ch := make(chan struct{})
			s.mu.names.inflight[name] = ch
			s.mu.Unlock()
			return Ack{}, func() {
				s.mu.Lock()
				delete(s.mu.names.inflight, name)
				s.mu.Unlock()
				close(ch)
			}, nil
		}
		s.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return Ack{}, nil, ctx.Err()
		case <-s.stop:
			return Ack{}, nil, ErrClosed
		}
	}
}

// waitForRoom waits while the memtable is over its bound, starting a
// flush.
func (s *Shard) waitForRoom(ctx context.Context) (err error) {
	var stall time.Time // when the append began to wait
	defer func() { s.stalled(StallMemtable, stall, err) }()
	for {
		if err := s.fencedErr(); err != nil {
			return err
		}
		s.mu.Lock()
		full := s.mu.mem.bytes > s.opts.MaxMemtableBytes
		changed := s.changedLocked()
		s.mu.Unlock()
		if !full {
			return nil
		}
		if stall.IsZero() {
			stall = time.Now()
		}
		s.triggerFlush()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.stop:
			return ErrClosed
		case <-changed: // a flush shrank the memtable, or the handle was fenced
		}
	}
}

// writeLoop gathers concurrent appends into WAL entries.
func (s *Shard) writeLoop() {
	ctx := s.ctx        // ends with Close
	var held *appendReq // a request of another mode than the group's: the next group's first
	for {
		var reqs []appendReq
		if held != nil {
			reqs, held = append(reqs, *held), nil
		} else {
			select {
			case r := <-s.appendq:
				reqs = append(reqs, r)
			case <-s.stop:
				return
			}
		}
		size := reqs[0].bytes()
		timer := time.NewTimer(s.opts.GroupWait)
	gather:
		for size < s.opts.GroupBytes {
			select {
			case r := <-s.appendq:
				if !slices.Equal(r.keys, reqs[0].keys) {
					// Upserts and appends (or upserts by other keys) go in
					// entries of their own, in the order they came.
					held = &r
					break gather
				}
				reqs = append(reqs, r)
				size += r.bytes()
			case <-timer.C:
				break gather
			case <-s.stop:
				break gather
			}
		}
		timer.Stop()
		s.writeGroup(ctx, reqs)
	}
}

// writeGroup writes reqs as one WAL entry and answers each. Before each
// try it answers, as duplicates, the idempotent appends the shard has
// recorded meanwhile: an earlier attempt of the same append whose outcome
// was unknown, found landed at the position when this entry went to take
// it (errTookInLanded).
func (s *Shard) writeGroup(ctx context.Context, reqs []appendReq) {
	for {
		if reqs = s.answerRecorded(reqs); len(reqs) == 0 {
			return
		}
		pos, err := s.writeEntrySafe(ctx, reqs)
		if errors.Is(err, wal.ErrTookInLanded) {
			continue
		}
		for _, r := range reqs {
			if err != nil {
				fragment.ReleaseAll(r.recs)
			}
			r.done <- Ack{Position: pos, Rows: r.rows, err: err}
		}
		return
	}
}

// answerRecorded answers the requests whose names the shard records, and
// returns the others.
func (s *Shard) answerRecorded(reqs []appendReq) []appendReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.DeleteFunc(reqs, func(r appendReq) bool {
		if r.key == nil {
			return false
		}
		o, found, err := s.mu.names.producers.Lookup(*r.key)
		if !found && err == nil {
			return false
		}
		fragment.ReleaseAll(r.recs)
		r.done <- Ack{Position: o.At, Rows: o.Rows, Duplicate: found, err: err}
		return true
	})
}

func (r appendReq) bytes() int64 {
	var n int64
	for _, rec := range r.recs {
		n += wal.RecordBytes(rec)
	}
	return n
}

// writeEntrySafe is writeEntry with a panic turned into an error: a
// shard's background loop must not take the process down.
func (s *Shard) writeEntrySafe(ctx context.Context, reqs []appendReq) (pos uint64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("walshard: shard %q: writing a WAL entry panicked: %v", s.id, r)
		}
	}()
	return s.writeEntry(ctx, reqs)
}

// writeEntry creates the next WAL entry with the requests' rows and, once
// it is in the bucket, adds them to the memtable (which takes the
// references) and records their names. It returns the entry's position.
func (s *Shard) writeEntry(ctx context.Context, reqs []appendReq) (uint64, error) {
	if err := s.fencedErr(); err != nil {
		return 0, err
	}
	if err := s.checkSchema(ctx); err != nil {
		return 0, err
	}
	a, err := s.newAttempt(reqs)
	if err != nil {
		return 0, err
	}
	// Claims not read for epochRecheck are read before the write, not
	// only after it (the same two requests before the acknowledgement):
	// an owner that was away while a newer one took the shard — or while
	// garbage collection retired it — is fenced without leaving an entry.
	s.mu.Lock()
	stale := s.now().Sub(s.mu.wal.verified) > epochRecheck
	quiet := s.now().Sub(s.mu.wal.wrote) > KeepAliveEvery
	s.mu.Unlock()
	if stale {
		if err := s.checkEpochRetrying(ctx, a.deadline); err != nil {
			return 0, err
		}
	}
	if err := s.create(ctx, a); err != nil {
		return 0, err
	}
	s.mu.Lock()
	stale = s.now().Sub(s.mu.wal.verified) > epochRecheck
	s.mu.wal.wrote = s.now()
	s.mu.Unlock()
	// A handle quiet for KeepAliveEvery reads the claims after the write
	// too: a collection that found the shard quiet may have listed it
	// before the entry landed, and claimed after the read before it. If
	// the entry landed before that claim, the collection sees it when it
	// lists the shard again and retires nothing; if after, this read sees
	// the claim (or this handle's own gone) and the entry is not
	// acknowledged.
	if a.uncertain || stale || quiet {
		if err := s.checkEpochRetrying(ctx, a.deadline); err != nil {
			s.markUncertain(a)
			switch {
			case errors.Is(err, ErrDropped):
				// The table's drop fenced the shard: its rows go with it.
				return 0, fmt.Errorf("walshard: shard %q: WAL entry %d landed after the table's drop fenced the shard: %w: %w", s.id, a.pos, ErrAppendUnknown, err)
			case errors.Is(err, ErrFenced):
				// The newer owner may have replayed this entry (if its fence
				// went above it) or not (if it had cleaned the position up).
				return 0, fmt.Errorf("walshard: shard %q: WAL entry %d landed after a newer owner claimed the shard: %w: %w", s.id, a.pos, ErrAppendUnknown, err)
			}
			return 0, err
		}
	}
	s.mu.Lock()
	s.mu.wal.nextPos = a.pos + 1
	s.mu.Unlock()
	var reuse *format.Fragment
	if s.opts.ReuseBytes > 0 && a.e.Frag.Bytes >= s.opts.ReuseBytes && len(a.e.Keys) == 0 {
		reuse = &a.e.Frag
		reuse.Key = s.l.WalKey(a.pos)
	}
	s.addToMemtable(a.pos, a.e.Batches, reuse, a.e.Appends, a.e.Keys)
	return a.pos, nil
}

// walAttempt is one attempt to create a WAL entry at pos.
type walAttempt struct {
	pos  uint64
	e    *wal.Entry
	data []byte
	// earlier: the ids of the attempts that may have landed at pos; when
	// there are any, or this attempt's outcome was unknown a while
	// (uncertain), the entry is acknowledged only once no newer epoch is
	// claimed after it landed.
	earlier   []string
	uncertain bool
	// deadline bounds waiting for a create to show; resolveBy waiting
	// for a store that does not answer (zero: never).
	deadline, resolveBy time.Time
}

// newAttempt encodes the requests' rows as the entry at the next position.
func (s *Shard) newAttempt(reqs []appendReq) (*walAttempt, error) {
	s.mu.Lock()
	a := &walAttempt{pos: s.mu.wal.nextPos}
	// An earlier attempt at this position may have landed unseen. A newer
	// owner then placed its fence above it, replayed it, and may have
	// cleaned it up since: the position can be free again below the fence,
	// where nobody will replay what is written.
	if a.uncertain = s.mu.wal.uncertain == a.pos; a.uncertain {
		a.earlier = slices.Clone(s.mu.wal.uncertainIDs)
	}
	s.mu.Unlock()
	a.e = &wal.Entry{Kind: wal.KindData, Epoch: s.epoch, Position: a.pos, Id: format.NewID(), Keys: reqs[0].keys}
	var size, rows int64 // the rows' memory, and count
	for _, r := range reqs {
		a.e.Batches = append(a.e.Batches, r.recs...)
		size += r.bytes()
		if r.key != nil {
			at := rows
			a.e.Appends = append(a.e.Appends, wal.AppendRecord{AppendKey: *r.key, Rows: r.rows, Offset: &at})
		}
		rows += r.rows
	}
	// Only an entry whose rows take ReuseBytes in memory may be large
	// enough to join the table as it is: a smaller one is written in the
	// binary form, which costs far less to encode than Parquet.
	var err error
	if a.data, err = wal.EncodeEntry(a.e, s.schema, s.opts.ReuseBytes > 0 && size >= s.opts.ReuseBytes); err != nil {
		return nil, err
	}
	a.deadline = time.Now().Add(s.budget())
	if s.opts.ResolveWithin > 0 {
		a.resolveBy = time.Now().Add(min(s.opts.ResolveWithin, s.budget()))
	}
	return a, nil
}

// markUncertain records that a's entry may have landed unseen.
func (s *Shard) markUncertain(a *walAttempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &s.mu.wal
	if w.uncertain != a.pos {
		w.uncertainIDs = nil
	}
	w.uncertain = a.pos
	if !slices.Contains(w.uncertainIDs, a.e.Id) {
		w.uncertainIDs = append(w.uncertainIDs, a.e.Id)
	}
}

// create creates a's entry, resolving what the store leaves unanswered:
// nil once the entry is there, errTookInLanded when an earlier attempt of
// this handle holds the position (its rows are taken in), the fencing
// error when another owner's does, and ErrAppendUnknown when whose entry
// is there cannot be told.
func (s *Shard) create(ctx context.Context, a *walAttempt) error {
	unknown := func(err error) error {
		s.markUncertain(a)
		return fmt.Errorf("walshard: shard %q: WAL entry %d: %w: %w", s.id, a.pos, ErrAppendUnknown, err)
	}
	for attempt := 1; ; attempt++ {
		err := s.b.PutIfAbsent(ctx, s.l.WalKey(a.pos), a.data)
		if err == nil {
			return nil
		}
		if !errors.Is(err, blob.ErrExists) && !blob.IsRetryable(err) {
			if attempt > 1 { // an earlier attempt here may have landed
				return unknown(err)
			}
			return err
		}
		// Outcome unknown, or the position is taken: whose entry is there?
		got, rerr := s.readEntry(ctx, a.pos, true)
		switch {
		case rerr == nil && got.Id == a.e.Id:
			return nil
		case rerr == nil && slices.Contains(a.earlier, got.Id) && got.Epoch == s.epoch:
			// An earlier append's entry, whose outcome it could not read,
			// did land: its rows are the shard's, as a reopening would
			// replay them. Take them in; ours go after them.
			if err := s.takeInLanded(ctx, a.pos, a.deadline); err != nil {
				return err
			}
			return wal.ErrTookInLanded
		case rerr == nil:
			return s.fencedOrDropped(ctx, "") // a newer owner's fence (or entry) holds our position
		case errors.Is(rerr, blob.ErrNotFound) && time.Now().Before(a.deadline),
			blob.IsRetryable(rerr) && time.Now().Before(a.resolveBy):
			// Not there yet (a create may land late), or the store does
			// not answer: read again, and create again (a no-op if ours
			// landed), after a pause.
			a.uncertain = true
			if err := backoff.Sleep(ctx, walRetry.Delay(attempt)); err != nil {
				return unknown(err)
			}
		default:
			// Whose entry is at pos, if any, could not be read: ours may
			// have landed.
			return unknown(err)
		}
	}
}

// takeInLanded replays the entry at pos that an earlier append of this
// handle wrote without learning it had landed, once no newer owner has
// claimed the shard (which may have replayed it, or cleaned its position
// up), and moves the next position past it.
func (s *Shard) takeInLanded(ctx context.Context, pos uint64, deadline time.Time) error {
	if err := s.checkEpochRetrying(ctx, deadline); err != nil {
		switch {
		case errors.Is(err, ErrDropped):
			return fmt.Errorf("walshard: shard %q: WAL entry %d, from an append whose outcome was unknown, landed; the table's drop has fenced the shard since: %w: %w", s.id, pos, ErrAppendUnknown, err)
		case errors.Is(err, ErrFenced):
			return fmt.Errorf("walshard: shard %q: WAL entry %d, from an append whose outcome was unknown, landed; a newer owner has claimed the shard since: %w", s.id, pos, ErrAppendUnknown)
		}
		return err
	}
	if err := s.replayEntry(ctx, pos); err != nil {
		return fmt.Errorf("walshard: shard %q: reading WAL entry %d, from an append whose outcome was unknown: %w", s.id, pos, err)
	}
	s.mu.Lock()
	s.mu.wal.nextPos, s.mu.wal.uncertainIDs = pos+1, nil
	s.mu.Unlock()
	return nil
}

// appendNames are the names of idempotent appends: those recorded (of
// entries that landed; see State.Producers), and those being written,
// each with a channel closed when its write ends.
type appendNames struct {
	producers format.Producers
	inflight  map[appendName]chan struct{}
}

// record records an entry's named appends, at its position.
func (n *appendNames) record(pos uint64, appends []wal.AppendRecord) {
	for _, a := range appends {
		n.producers = n.producers.Record(a.AppendKey, pos, a.Rows)
	}
}
