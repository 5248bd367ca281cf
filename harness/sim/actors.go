package sim

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
)

// Shard writers.

func (w *world) shardOptions(a *actor) walshard.Options {
	return walshard.Options{
		Shard:      a.name,
		GroupWait:  20 * time.Microsecond,
		FlushBytes: 1 << 40, MaxMemtableBytes: 1 << 40, MaxPendingGenerations: 1 << 20,
		MergeMaxGenerations: 1 + w.intn(4),
		// Entries written as fragments, every one or the larger ones
		// joining the table as they are, or the binary form.
		ReuseBytes: []int64{-1, 1, 900}[w.intn(3)],
		// An append whose outcome a failed read hides fails at once, as a
		// store away for longer than ResolveWithin makes it: the uncertain
		// positions, and the next append's taking in of what landed there,
		// are what the simulation must reach (waiting, an append re-reads
		// past the few failures it injects).
		ResolveWithin: -1,
		Commit:        w.commitOptions(a),
	}
}

// reopen opens a's shard as a new process: a fresh bucket view, a new
// epoch, and the replay of the WAL.
func (w *world) reopen(a *actor) error {
	if a.shard != nil {
		_ = a.shard.Close()
		a.shard = nil
	}
	a.inc++
	w.newBucket(a)
	s, err := w.db(a).Shard(w.ctx)
	if err != nil {
		return err
	}
	a.shard, a.restart = s, false
	return nil
}

func (w *world) shardOp(a *actor, rec *opRecord) (string, string) {
	if a.next != nil && a.zombie == nil {
		// A fencer opened the shard while this handle was busy.
		a.zombie, a.shard, a.next = a.shard, a.next, nil
		a.inc++
		rec.writer = a.writer()
	}
	if a.zombie != nil && w.intn(3) == 0 {
		// The fenced handle tries once more, now or steps later (paused
		// while the new owner appends, flushes, merges and cleans up);
		// nothing it writes may appear.
		z := a.zombie
		a.zombie = nil
		ids := w.newRows()
		b := batch(ids)
		err := z.Append(w.ctx, b)
		b.Release()
		_ = z.Close()
		if err == nil {
			w.settle(ids, nil, false)
			return "zombie-append", w.fail("fencing", "a fenced handle of %s acknowledged an append of %d rows", a.name, len(ids)).Error()
		}
		w.settle(ids, err, refused(err))
		return "zombie-append", short(err)
	}
	if a.shard == nil || a.restart {
		err := w.reopen(a)
		rec.writer = a.writer()
		return "open", short(err)
	}
	s := a.shard
	switch n := w.intn(100); {
	case n < 55 && w.shardUpserts && w.sideIntn(3) == 0:
		return "upsert", w.shardUpsert(a, s)
	case n < 55:
		return "append", w.shardAppend(a, s)
	case n < 70:
		g, err := s.Flush(w.ctx)
		if errors.Is(err, walshard.ErrFenced) && a.next == nil {
			a.restart = true
		}
		return "flush", fmt.Sprintf("gen %d: %s", g, short(err))
	case n < 85:
		rec.commits, rec.steps = true, true
		res, err := s.Merge(w.ctx)
		if errors.Is(err, walshard.ErrFenced) && a.next == nil {
			a.restart = true
		}
		return "merge", fmt.Sprintf("%d gens, watermark %d, v%d: %s", res.Generations, res.Watermark, res.Version, short(err))
	case n < 95:
		return "fresh-read", w.freshRead(a)
	default:
		a.restart = true
		return "kill", "the process dies; it reopens on its next turn"
	}
}

// freshRead checks a fresh read of a's shard: every row a's shard
// acknowledged (in any process), and every direct append acknowledged
// before it began, exactly once.
func (w *world) freshRead(a *actor) string {
	w.mu.Lock()
	want := slices.Collect(maps.Keys(w.shardRows[a.idx]))
	if !w.listLag {
		// Through a lagging listing the base may be a moment old.
		want = append(want, w.directRows...)
	}
	w.mu.Unlock()
	slices.Sort(want)
	seen, _, err := readRows(a.shard.ScanFresh(w.ctx, table.ScanOptions{Parallelism: 1}))
	var v *Violation
	if errors.As(err, &v) {
		return w.fail(v.Oracle, "fresh read of %s: %s", a.name, v.Detail).Error()
	}
	if err != nil {
		if errors.Is(err, walshard.ErrFenced) && a.next == nil {
			a.restart = true
		}
		return short(err)
	}
	if msg := w.checkRows(seen, want, "fresh read of "+a.name); msg != "" {
		return msg
	}
	return fmt.Sprintf("%d rows, each once; %s", len(seen), w.fleetRead(a))
}

// fleetRead checks a fresh read of every shard (walshard.ScanFleet, what
// the server's fresh scan reads): every row acknowledged before it began —
// in a shard's WAL, its generations or the table, or appended directly —
// exactly once. It follows a shard's own fresh read, when that shard has
// just appended as often as not, so a shard's newest WAL entry is often
// unflushed: the read must take it. Through a lagging listing the end of
// a WAL and the newest version may be a moment old: not checked then.
func (w *world) fleetRead(a *actor) string {
	if w.listLag {
		return "fleet read: not checked (listings lag)"
	}
	w.mu.Lock()
	want := slices.Collect(maps.Keys(w.acked))
	w.mu.Unlock()
	slices.Sort(want)
	seen, _, err := readRows(walshard.ScanFleet(w.ctx, a.bucket, table.ScanOptions{Parallelism: 1}))
	var v *Violation
	if errors.As(err, &v) {
		return w.fail(v.Oracle, "fleet read by %s: %s", a.name, v.Detail).Error()
	}
	if err != nil {
		return "fleet read: " + short(err)
	}
	if msg := w.checkRows(seen, want, "fleet read by "+a.name); msg != "" {
		return msg
	}
	return fmt.Sprintf("fleet read: %d rows, each once", len(seen))
}

// checkRows checks a read: each id in want once (unless a Delete removed
// it since), no id more than once, no forbidden id, no id nobody wrote.
// It returns the violation, if any.
func (w *world) checkRows(seen map[int64]int, want []int64, where string) string {
	return w.checkRowsAt(seen, want, 0, where)
}

// checkRowsAt is checkRows of a read of version v: no row a Delete at or
// before v removed may appear.
func (w *world) checkRowsAt(seen map[int64]int, want []int64, v uint64, where string) string {
	oracle, detail := w.rowTrouble(seen, want, v)
	if oracle == "" {
		return ""
	}
	return w.fail(oracle, "%s: %s", where, detail).Error()
}

func (w *world) rowTrouble(seen map[int64]int, want []int64, v uint64) (oracle, detail string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rep.RowsChecked += int64(len(seen))
	for _, id := range slices.Sorted(maps.Keys(seen)) {
		switch n := seen[id]; {
		case n > w.copiesLocked(id):
			return "exactly once", fmt.Sprintf("row %d appears %d times", id, n)
		case v > 0 && w.deletedAt[id] > 0 && w.deletedAt[id] <= v && w.copiesLocked(id) == 1:
			// (A named append sent again past its window may store its
			// rows a second time, after a delete of the first.)
			return "deleted rows stay deleted", fmt.Sprintf("row %d, deleted at v%d, appears", id, w.deletedAt[id])
		case w.forbidden[id]:
			return "fencing", fmt.Sprintf("row %d, refused to a fenced writer, appears", id)
		case isKey(id) && len(w.keyWrites[id]) == 0:
			return "no phantom rows", fmt.Sprintf("key %d was never written", id-keyBase)
		case !isKey(id) && (id < 1 || id > w.nextID):
			// Ids handed out so far, including those of appends still
			// running (a read nested inside one may see its rows).
			return "no phantom rows", fmt.Sprintf("row %d was never written", id)
		}
	}
	for _, id := range want {
		if _, gone := w.deletedAt[id]; !gone && seen[id] == 0 {
			return "no lost rows", fmt.Sprintf("acknowledged row %d is missing", id)
		}
	}
	return "", ""
}

// Direct appenders.

// openTable opens a's table handle, once per process.
func (w *world) openTable(a *actor) error {
	if a.tbl != nil {
		return nil
	}
	o := w.commitOptions(a)
	t, err := commit.OpenTable(w.ctx, a.bucket, &o)
	a.tbl = t
	return err
}

func (w *world) directOp(a *actor, rec *opRecord) (string, string) {
	rec.commits = true
	if err := w.openTable(a); err != nil {
		return "open", short(err)
	}
	ids, key := w.nextAppend(a)
	began := w.now()
	b := batch(ids)
	var sc *arrow.Schema
	if !a.keyed {
		// Added columns too; a named append sends the same rows again
		// whatever the schema meanwhile.
		b.Release()
		sc = a.tbl.Current().Manifest().Schema()
		b = batchFor(sc, ids)
	}
	var res commit.Result
	var err error
	if a.keyed {
		res, err = a.tbl.AppendOnce(w.ctx, key, b)
	} else {
		res, err = a.tbl.Append(w.ctx, b)
	}
	b.Release()
	w.settleAppend(a, ids, err, false)
	if err == nil {
		if verr := w.ackExtras(ids, sc, began, a.name); verr != nil {
			return "append", verr.Error()
		}
		w.mu.Lock()
		w.directRows = append(w.directRows, ids...)
		w.mu.Unlock()
	}
	return "append", fmt.Sprintf("ids %d..%d%s at v%d: %s", ids[0], ids[len(ids)-1], keyNote(a, key, res.Duplicate), res.Version, short(err))
}

// keyNote describes a named append in the trace.
func keyNote(a *actor, key format.Idempotency, dup bool) string {
	switch {
	case !a.keyed:
		return ""
	case dup:
		return fmt.Sprintf(" as %s/%d (a duplicate: stored before)", key.Producer, key.Seq)
	}
	return fmt.Sprintf(" as %s/%d", key.Producer, key.Seq)
}

// Compactors and GC.

func (w *world) compactOp(a *actor) (string, string) {
	p := compactor.Policy{MinFragments: 2 + w.intn(4), TargetRows: int64(40 + w.intn(200))}
	// Leased: the simulation runs compactors at once on purpose, to check
	// that the conflict matrix alone keeps rows safe.
	info, err := w.db(a).Compact(w.ctx, engine.CompactOptions{Policy: &p, NoLease: true,
		Tune: compactor.Options{Commit: w.commitOptions(a), Parallelism: 1}})
	res := info.Result
	if errors.Is(err, compactor.ErrRowsChanged) {
		return "compact", w.fail("compaction conserves rows", "%v", err).Error()
	}
	return "compact", fmt.Sprintf("%d -> %d fragments at v%d: %s", res.FragmentsBefore, res.FragmentsAfter, res.Version, short(err))
}

// Readers.

func (w *world) readerOp(a *actor, rec *opRecord) (string, string) {
	switch n := w.intn(10); {
	case n < 5:
		s, err := table.Open(w.ctx, a.bucket, nil)
		if err != nil {
			return "read", short(err)
		}
		seen, d, err := w.scanSnapshot(s)
		var v *Violation
		if errors.As(err, &v) {
			return "read", w.fail(v.Oracle, "%s at v%d", v.Detail, s.Version()).Error()
		}
		if err != nil {
			return "read", fmt.Sprintf("v%d: %s", s.Version(), short(err))
		}
		if msg := w.checkRowsAt(seen, nil, s.Version(), fmt.Sprintf("read of v%d", s.Version())); msg != "" {
			return "read", msg
		}
		if w.chance(0.5) {
			if msg := w.checkTake(s, seen); msg != "" {
				return "read", msg
			}
		}
		rec.read = &d
		return "read", fmt.Sprintf("v%d: %v", s.Version(), d)
	case n < 7:
		s, err := table.Open(w.ctx, a.bucket, nil)
		if err != nil {
			return "pin", short(err)
		}
		_, d, err := w.scanSnapshot(s)
		if err != nil {
			return "pin", fmt.Sprintf("v%d: %s", s.Version(), short(err))
		}
		p := pin{version: s.Version(), rows: d}
		// Tags rely on listings that show every create (see
		// table.CreateTag); with lagging listings pins go untagged.
		if !w.listLag && w.chance(0.5) {
			w.tags++
			name := fmt.Sprintf("%s-%d", a.name, w.tags)
			if err := table.CreateTag(w.ctx, a.bucket, name, p.version); err != nil {
				return "pin", fmt.Sprintf("v%d, tag %s: %s", p.version, name, short(err))
			}
			p.tagged = true
		}
		a.pins = append(a.pins, p)
		return "pin", fmt.Sprintf("v%d (tagged %v): %v", p.version, p.tagged, d)
	default:
		return "check-pins", w.checkPins(a)
	}
}

// checkPins reads each pinned version again: while it is retained, its
// rows are the same. A tagged version is always retained.
func (w *world) checkPins(a *actor) string {
	var kept []pin
	checked := 0
	for _, p := range a.pins {
		s, err := table.Open(w.ctx, a.bucket, &table.OpenOptions{Version: p.version})
		if errors.Is(err, format.ErrVersionNotFound) && !p.tagged {
			continue // collected: the pin is released
		}
		if err != nil {
			if errors.Is(err, format.ErrVersionNotFound) {
				return w.fail("pinned versions", "tagged version v%d is gone", p.version).Error()
			}
			kept = append(kept, p)
			continue
		}
		_, d, err := w.scanSnapshot(s)
		if errors.Is(err, blob.ErrNotFound) {
			if _, merr := w.store.Get(w.ctx, format.ManifestKey(p.version)); merr == nil || p.tagged {
				return w.fail("pinned versions", "v%d is retained but its data is gone: %v", p.version, err).Error()
			}
			continue
		}
		if err != nil {
			kept = append(kept, p)
			continue
		}
		if d != p.rows {
			return w.fail("pinned versions", "v%d read %v when pinned, %v now", p.version, p.rows, d).Error()
		}
		checked++
		kept = append(kept, p)
	}
	a.pins = kept
	return fmt.Sprintf("%d pins unchanged, %d held", checked, len(kept))
}

// The fencer.

// fenceOp opens a shard under its live writer, as a second process that
// claims the same shard id would. The writer's handle is fenced: its next
// attempt must fail, and the new handle takes over.
func (w *world) fenceOp() (string, string) {
	var shards []*actor
	for _, a := range w.actors {
		if a.kind == kShard && a.shard != nil && a.next == nil && a.zombie == nil && !a.restart {
			shards = append(shards, a)
		}
	}
	if len(shards) == 0 {
		return "fence", "no live shard writer"
	}
	a := shards[w.intn(len(shards))]
	bucket := w.procBucket(a, a.inc+1)
	o := w.shardOptions(a)
	o.Commit.Writer = fmt.Sprintf("%s#%d", a.name, a.inc+1)
	s, err := w.openDB(a, bucket, o).Shard(w.ctx)
	if err != nil {
		return "fence", fmt.Sprintf("%s: %s", a.name, short(err))
	}
	a.next = s
	if !a.busy {
		a.zombie, a.shard, a.next = a.shard, s, nil
		a.inc++
	}
	a.bucket = bucket
	return "fence", fmt.Sprintf("%s: epoch %d opened under the writer", a.name, s.Epoch())
}

// Fleet mergers and adopters.

// fleetOp merges every shard's flushed generations in one commit, or
// adopts a shard as the compactor Job does one whose owner went quiet:
// here whether or not its writer lives, which then finds itself fenced.
func (w *world) fleetOp(a *actor) (string, string) {
	if w.intn(10) < 7 {
		// Half the merges hold to a memory budget of a few flush objects
		// or less: they read states from tails, cut the first shard's
		// generations and leave the others to another pass.
		gens := 1 + w.intn(4)
		budget := []int64{0, 2 << 10, 0, 12 << 10}[gens-1]
		db, _ := engine.OpenNew(a.bucket, &engine.Options{Name: "sim", Writer: a.writer(), Now: w.clock.Now, Log: slog.New(slog.DiscardHandler),
			Fleet: fleetmerge.Options{MaxGenerations: gens, MemoryBudget: budget, Parallelism: 1, Commit: w.commitOptions(a)}})
		res, err := db.Merge(w.ctx)
		return "fleet-merge", fmt.Sprintf("%d shards announced, %d merged, %d generations at v%d: %s", res.Announced, res.Shards, res.Generations, res.Version, short(err))
	}
	var shards []*actor
	for _, b := range w.actors {
		if b.kind == kShard {
			shards = append(shards, b)
		}
	}
	target := shards[w.intn(len(shards))]
	o := w.shardOptions(target)
	o.Commit = w.commitOptions(a)
	res, err := w.db(a).Adopt(w.ctx, target.name, engine.AdoptOptions{Tune: &o})
	return "adopt", fmt.Sprintf("%s: epoch %d, %d rows replayed, %d generations merged at v%d: %s", target.name, res.Epoch, res.Rows, res.Generations, res.Version, short(err))
}

// checkTake takes a few keys of snapshot s — some it holds, some it does
// not — and checks the answer against seen, a scan of the same snapshot.
func (w *world) checkTake(s *table.Snapshot, seen map[int64]int) string {
	w.mu.Lock()
	top := w.nextID
	w.mu.Unlock()
	keys := make([]int64, 1+w.intn(8))
	for i := range keys {
		keys[i] = 1 + int64(w.intn(int(top)+5))
	}
	recs, _, err := s.Take(w.ctx, "id", value.Ints(keys...), nil)
	got, _, rerr := readRows(func(yield func(arrow.RecordBatch, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	})
	for _, r := range recs {
		r.Release()
	}
	if err != nil {
		return ""
	}
	var v *Violation
	if errors.As(rerr, &v) {
		return w.fail(v.Oracle, "take at v%d: %s", s.Version(), v.Detail).Error()
	}
	for _, k := range keys {
		if got[k] != seen[k] {
			return w.fail("take agrees with scan", "take of %d at v%d answers %d rows, the scan holds %d", k, s.Version(), got[k], seen[k]).Error()
		}
	}
	for k := range got {
		if !slices.Contains(keys, k) {
			return w.fail("take agrees with scan", "take at v%d answers row %d, not asked for", s.Version(), k).Error()
		}
	}
	return ""
}

// Deleters.

// deleteOp deletes a range of ids, among those handed out so far.
func (w *world) deleteOp(a *actor) (string, string) {
	if err := w.openTable(a); err != nil {
		return "open", short(err)
	}
	w.mu.Lock()
	top := w.nextID
	var live []int64 // rows acknowledged and not deleted
	for id := range w.acked {
		if _, gone := w.deletedAt[id]; !gone {
			live = append(live, id)
		}
	}
	w.mu.Unlock()
	if top < 2 {
		return "delete", "nothing written yet"
	}
	draw := w.intn(int(top))
	lo := 1 + int64(draw)
	if len(live) > 0 && draw%2 == 0 {
		// Half the time from a row known to be there, so that deletes
		// meet compactions of the fragments they delete from.
		slices.Sort(live)
		lo = live[draw%len(live)]
	}
	hi := lo + 1 + int64(w.intn(6))
	filter := fmt.Sprintf("id >= %d AND id < %d", lo, hi)
	pred, err := expr.ParseFilter(filter)
	if err != nil {
		return "delete", w.fail("harness", "filter %q: %v", filter, err).Error()
	}
	res, n, err := a.tbl.Delete(w.ctx, pred)
	if err == nil && n > 0 { // n == 0: no commit, res.Version is the one read
		w.mu.Lock()
		w.deletesAcked[res.Version] = true
		by, undone := w.deletesUndone[res.Version]
		w.mu.Unlock()
		if undone {
			return "delete", w.fail("deleted rows stay deleted", "the delete of %s acknowledged at v%d was undone at v%d", filter, res.Version, by).Error()
		}
	}
	return "delete", fmt.Sprintf("%s: %d rows at v%d: %s", filter, n, res.Version, short(err))
}

func (w *world) newRows() []int64 {
	n := 1 + w.intn(20)
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]int64, n)
	for i := range ids {
		w.nextID++
		ids[i] = w.nextID
	}
	return ids
}

// nextAppend is a's next append: the one it must send again, or new rows
// (numbered, when a names its appends).
func (w *world) nextAppend(a *actor) ([]int64, format.Idempotency) {
	key := format.Idempotency{Producer: a.name}
	if a.retry != nil {
		key.Seq = a.retry.seq
		if w.clock.Now().Sub(a.retry.at) >= format.IdempotencyWindow {
			// Sent again past the window its name is remembered for (the
			// clock moved on with a stall): it may be stored twice, as
			// documented, and no more.
			w.mu.Lock()
			for _, id := range a.retry.ids {
				w.twice[id] = true
			}
			w.mu.Unlock()
		}
		return a.retry.ids, key
	}
	a.seq++
	key.Seq = a.seq
	return w.newRows(), key
}
