package sim

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
)

// manifestCreated records a manifest as it lands: who made it and what it
// did to the table's rows. Fragments are read once, when first added.
func (w *world) manifestCreated(key string, data []byte, again bool) {
	at := w.now()
	m, err := format.DecodeManifest(key, data)
	if err != nil {
		w.fail("manifests", "%s does not decode: %v", key, err)
		return
	}
	ev := manifestEvent{at: at, version: m.Version, writer: m.Transaction.Writer, kind: m.Transaction.Kind, undoes: m.Transaction.Undoes, again: again}
	if again {
		// A ghost of a collected version: its fragment ids were given on
		// a state that is gone and may name other fragments; it changes
		// nothing (manifestTrouble checks it is taken away again).
		w.emu.Lock()
		w.events = append(w.events, ev)
		w.emu.Unlock()
		w.logf("manifest v%d: %s by %s brings back a collected version", ev.version, ev.kind, ev.writer)
		return
	}
	w.emu.Lock()
	w.landed[m.Version] = w.clock.Now()
	w.emu.Unlock()
	w.noteNames(m)
	for _, f := range m.Transaction.Added {
		ev.added = append(ev.added, f.Key)
		w.emu.Lock()
		d, known := w.fragRows[f.ID]
		w.emu.Unlock()
		if !known {
			if f.Deletion != nil {
				w.noteBornDropped(f, m.Transaction.Named)
			}
			_, d, err = w.scanSnapshot(table.SnapshotOf(w.store, schema, []format.Fragment{f}))
			if err != nil {
				// Gone before its manifest landed (a stall past GC): no
				// read can see its rows, so they count for nothing.
				w.emu.Lock()
				w.fragLost[f.ID] = true
				w.emu.Unlock()
				ev.lost = true
				d = digest{}
			}
			w.emu.Lock()
			w.fragRows[f.ID] = d
			w.emu.Unlock()
		}
		ev.delta = ev.delta.add(d)
	}
	if m.Transaction.Kind == format.KindMerge && len(m.Transaction.Keys) > 0 {
		w.noteInstalled(m)
	}
	if u := m.Transaction.Undoes; u > 0 {
		w.noteUndo(m.Version, u)
	}
	for _, fd := range m.Transaction.Deletions {
		d, lost := w.deleted(m, fd.FragmentID)
		w.emu.Lock()
		ev.delta = ev.delta.add(d.sub(w.fragRows[fd.FragmentID]))
		w.fragRows[fd.FragmentID] = d
		w.emu.Unlock()
		ev.lost = ev.lost || lost
	}
	w.emu.Lock()
	for _, id := range m.Transaction.Removed {
		ev.delta = ev.delta.sub(w.fragRows[id])
		ev.lost = ev.lost || w.fragLost[id]
	}
	w.events = append(w.events, ev)
	w.emu.Unlock()
	w.logf("manifest v%d: %s by %s adds %d fragments %v, removes %v; rows %+d (lost %v, created again %v)",
		ev.version, ev.kind, ev.writer, len(ev.added), addedIDs(m), m.Transaction.Removed, ev.delta.N, ev.lost, ev.again)
}

// deleted reads fragment id as manifest m leaves it, after a Delete gave
// it a deletion vector: it returns the rows left and records the rows the
// vector removes as deleted at m's version. A fragment or vector that
// cannot be read (gone in a stall past GC) counts as lost.
func (w *world) deleted(m *format.Manifest, id uint64) (digest, bool) {
	fp := m.Fragment(id)
	if fp == nil {
		w.fail("manifests", "v%d deletes from fragment %d, which it does not hold", m.Version, id)
		return digest{}, true
	}
	f := *fp
	live, d, err := w.scanSnapshot(table.SnapshotOf(w.store, schema, []format.Fragment{f}))
	if err != nil {
		return digest{}, true
	}
	if u := m.Transaction.Undoes; u > 0 {
		// m takes back the delete at u: the rows it removed that are
		// live again are no longer deleted.
		w.mu.Lock()
		for rid := range live {
			if isKey(rid) {
				continue // an upserter's key: replaced, not deleted
			}
			if w.deletedAt[rid] == u {
				delete(w.deletedAt, rid)
			}
		}
		w.mu.Unlock()
	}
	f.Deletion = nil
	all, _, err := w.scanSnapshot(table.SnapshotOf(w.store, schema, []format.Fragment{f}))
	if err != nil {
		return digest{}, true
	}
	w.mu.Lock()
	for rid := range all {
		// Deleted here: no copy left live, and one was live before (a
		// fragment may hold a copy of a row dropped at birth beside a
		// live one: seed 83845).
		if live[rid] == 0 && !isKey(rid) && all[rid] > w.bornDropped[id][rid] {
			if _, ok := w.deletedAt[rid]; !ok {
				w.deletedAt[rid] = m.Version
			}
		}
	}
	w.mu.Unlock()
	return d, false
}

// noteBornDropped records the rows a fragment's deletion vector drops
// as it is added (a merge's copies of named appends stored by another
// shard too, kept from the table; named: the merge's record of them):
// dropped, not deleted, whatever later deletes from the fragment. They
// are read from the record, not the vector, which a stalled merge may
// find collected (and write again under another key).
func (w *world) noteBornDropped(f format.Fragment, named []format.NamedRows) {
	f.Deletion = nil
	ids := map[uint32]int64{} // by offset
	for rec, err := range table.SnapshotOf(w.store, schema, []format.Fragment{f}).Scan(w.ctx, table.ScanOptions{Columns: []string{"id"}, WithRowAddress: true, Parallelism: 1}) {
		if err != nil {
			return
		}
		offs := rec.Column(rec.Schema().FieldIndices(table.OffsetColumn)[0]).(*array.Uint32)
		for i, id := range rec.Column(0).(*array.Int64).Int64Values() {
			ids[offs.Value(i)] = id
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range format.DroppedRows(named)[f.Key] {
		if w.bornDropped[f.ID] == nil {
			w.bornDropped[f.ID] = map[int64]int{}
		}
		w.bornDropped[f.ID][ids[r]]++
	}
}

// noteUndo records that version v takes back version u, which must not
// be an acknowledged delete (deleted gives back the rows it removed).
func (w *world) noteUndo(v, u uint64) {
	w.mu.Lock()
	w.deletesUndone[u] = v
	acked := w.deletesAcked[u]
	w.mu.Unlock()
	if acked {
		w.fail("deleted rows stay deleted", "v%d undoes v%d, an acknowledged delete", v, u)
	}
}

// checkQuiet runs between top-level steps, when no operation is running.
func (w *world) checkQuiet() error {
	if err := w.store.manifestTrouble(w.final.Load()); err != nil {
		return w.fail("manifests", "%v", err)
	}
	return nil
}

// finish ends the run without faults: every shard reopens (replaying its
// WAL) and drains, a compaction and a collection run, and the base table
// must hold every acknowledged row exactly once.
func (w *world) finish() error {
	w.final.Store(true)
	w.store.Consistent()
	w.logf("final: no more faults; every shard reopens and drains")
	for _, a := range w.actors {
		if a.kind != kShard {
			continue
		}
		for _, h := range []*walshard.Shard{a.zombie, a.next} {
			if h != nil {
				_ = h.Close()
			}
		}
		a.zombie, a.next = nil, nil
		if err := w.reopen(a); err != nil {
			return w.fail("recovery", "%s does not reopen: %v", a.name, err)
		}
		if err := w.completeRetry(a); err != nil {
			return err
		}
		rec := opRecord{actor: a.name, writer: a.writer(), commits: true, call: w.now()}
		err := w.drain(a.shard, a.writer())
		if errors.Is(err, blob.ErrNotFound) {
			// An object the table references is gone: a writer that
			// stalled past a collection died before putting it back. The
			// Job's merge meets it too, and repairs what can be repaired
			// without losing anything (engine.DB.Merge); then the shard
			// drains.
			w.logf("final: %s meets a missing object (%v); the Job's repair runs", a.name, err)
			rep := &actor{name: "repair-final", kind: kCompactor}
			w.newBucket(rep)
			repRec := opRecord{actor: rep.name, writer: rep.writer(), commits: true, call: w.now()}
			res, rerr := w.db(rep).Repair(w.ctx, false)
			repRec.ret = w.now()
			w.ops = append(w.ops, repRec)
			w.logf("final: repair: undone %v, vectors written again %v: %v", res.Undone, res.Rewritten, rerr)
			err = w.drain(a.shard, a.writer())
		}
		rec.ret = w.now()
		w.ops = append(w.ops, rec)
		if err != nil {
			return w.fail("recovery", "%s does not drain: %v", a.name, err)
		}
		st, err := walshard.Inspect(w.ctx, w.store, a.name)
		if err != nil || st.PendingGenerations != 0 {
			return w.fail("recovery", "%s after draining: %+v, %v", a.name, st, err)
		}
		_ = a.shard.Close()
	}
	for _, a := range w.actors {
		if a.kind == kDirect {
			if err := w.completeRetry(a); err != nil {
				return err
			}
		}
	}
	w.logf("final: collection, compaction and collection")
	c := &actor{name: "compactor-final", kind: kCompactor}
	w.newBucket(c)
	rec := opRecord{actor: c.name, writer: c.writer(), commits: true, call: w.now()}
	o := compactor.Options{Commit: w.commitOptions(c), Parallelism: 1}
	db := w.db(c)
	if _, err := db.GC(w.ctx, engine.GCOptions{Policy: &compactor.GCPolicy{KeepVersions: 1000, Commit: o.Commit}, Now: w.clock.Now()}); err != nil {
		return w.fail("recovery", "first final collection: %v", err)
	}
	if _, err := db.Compact(w.ctx, engine.CompactOptions{Policy: &compactor.Policy{MinFragments: 2}, NoLease: true, Tune: o}); err != nil {
		m, _ := table.ReadLatest(w.ctx, w.store)
		return w.fail("recovery", "final compaction: %v%s", err, w.provenance(m))
	}
	rec.ret = w.now()
	w.ops = append(w.ops, rec)
	if err := w.checkQuiet(); err != nil {
		return err
	}
	if err := w.finishFollowers(); err != nil {
		return err
	}
	if err := w.finishGroup(); err != nil {
		return err
	}
	w.clock.Advance(3 * time.Hour)
	final, _ := engine.OpenNew(w.store, &engine.Options{Name: "sim", Writer: "gc-final", Now: w.clock.Now, Log: slog.New(slog.DiscardHandler)})
	if _, err := final.GC(w.ctx, engine.GCOptions{Policy: &compactor.GCPolicy{KeepVersions: 1}, Now: w.clock.Now()}); err != nil {
		return w.fail("recovery", "final collection: %v", err)
	}
	if err := w.checkNames(); err != nil {
		return err
	}
	if err := w.checkFinalTable(); err != nil {
		return err
	}
	return w.checkLinearizable()
}

// checkFinalTable checks the table after the final collection: every
// acknowledged row not deleted once, the upserters' keys, the tagged
// versions.
func (w *world) checkFinalTable() error {
	s, err := table.Open(w.ctx, w.store, nil)
	if err != nil {
		return w.fail("recovery", "final open: %v", err)
	}
	seen, _, err := w.scanSnapshot(s)
	if err != nil {
		return w.fail("no lost rows", "the final table does not read: %v%s", err, w.provenance(s.Manifest()))
	}
	want := make([]int64, 0, len(w.acked))
	for id := range w.acked {
		if _, gone := w.deletedAt[id]; !gone {
			want = append(want, id)
		}
	}
	slices.Sort(want)
	if msg := w.checkRowsAt(seen, want, s.Version(), fmt.Sprintf("final table v%d", s.Version())); msg != "" {
		return w.violation
	}
	keys := 0
	for id := range seen {
		if isKey(id) {
			keys++
		}
	}
	w.logf("final: v%d holds %d rows: the %d acknowledged and not deleted (%d deleted), each once, %d of %d whose append failed, and %d upserted keys",
		s.Version(), len(seen), len(want), len(w.deletedAt), len(seen)-len(want)-keys, len(w.maybe), keys)
	if w.upserters > 0 {
		vals, err := keyValues(w.ctx, s)
		if err != nil {
			return w.fail("no lost rows", "the final table's keys do not read: %v", err)
		}
		if err := w.checkKeys(seen, vals); err != nil {
			return err
		}
	}
	for _, p := range w.allPins() {
		if p.tagged {
			s, err := table.Open(w.ctx, w.store, &table.OpenOptions{Version: p.version})
			if err != nil {
				return w.fail("pinned versions", "tagged v%d after the final collection: %v", p.version, err)
			}
			if _, d, err := w.scanSnapshot(s); err != nil || d != p.rows {
				return w.fail("pinned versions", "tagged v%d after the final collection: %v, %v (pinned %v)", p.version, d, err, p.rows)
			}
		}
	}
	return nil
}

// completeRetry sends a's named append whose outcome it never learned
// again (faults are off by now), through a new process: it must be
// acknowledged, and its rows are then checked as every acknowledged row
// is — once, whether an earlier attempt landed or not.
func (w *world) completeRetry(a *actor) error {
	if a.retry == nil {
		return nil
	}
	ids, key := w.nextAppend(a)
	b := batch(ids)
	defer b.Release()
	var err error
	var dup bool
	if a.kind == kDirect {
		a.tbl = nil
		a.inc++
		w.newBucket(a)
	}
	rec := opRecord{actor: a.name, writer: a.writer(), commits: true, call: w.now()}
	defer func() {
		rec.ret = w.now()
		w.ops = append(w.ops, rec)
	}()
	switch a.kind {
	case kShard:
		var ack walshard.Ack
		ack, err = a.shard.AppendOnce(w.ctx, key, b)
		dup = ack.Duplicate
	case kDirect:
		if err = w.openTable(a); err == nil {
			var res commit.Result
			res, err = a.tbl.AppendOnce(w.ctx, key, b)
			dup = res.Duplicate
		}
	}
	if err != nil {
		return w.fail("recovery", "%s: its named append %d sent again: %v", a.name, key.Seq, err)
	}
	w.logf("final: %s's named append %d sent again: %s", a.name, key.Seq, map[bool]string{true: "a duplicate", false: "stored"}[dup])
	w.settleAppend(a, ids, nil, false)
	return nil
}

// drain flushes s and merges until nothing awaits merging, as Drain
// does, but gives up after a bounded number of passes: a merge that never
// moves the watermark would loop for ever.
func (w *world) drain(s *walshard.Shard, writer string) error {
	if _, err := s.Flush(w.ctx); err != nil {
		return err
	}
	repaired := false
	for range 100 {
		res, err := s.Merge(w.ctx)
		var missing *format.MissingDataError
		if errors.As(err, &missing) && !repaired {
			// A merge of upserts reads the vectors of the fragments it
			// deletes from: one a stalled, dead writer's commit left
			// missing waits for the Job's repair, which runs here.
			repaired = true
			co := compactor.Options{}.Commit
			co.Writer = writer // the drain's, whose record holds the repair's commits
			if _, rerr := compactor.Repair(w.ctx, w.store, &co, nil); rerr != nil {
				return errors.Join(err, rerr)
			}
			continue
		}
		if err != nil {
			return err
		}
		if st := s.Stats(); st.PendingGenerations == 0 && res.Generations == 0 {
			return nil
		}
	}
	return fmt.Errorf("generations still await merging after 100 merges: %+v", s.Stats())
}

func (w *world) allPins() []pin {
	var ps []pin
	for _, a := range w.actors {
		ps = append(ps, a.pins...)
	}
	return ps
}

// The sequential model: the table is a multiset of rows (its digest).
// A commit adds what its manifests added; a read returns the whole.
type commitIn struct{ delta digest }
type readIn struct{}

var model = porcupine.Model{
	Init: func() any { return digest{} },
	Step: func(state, input, output any) (bool, any) {
		st := state.(digest)
		switch in := input.(type) {
		case commitIn:
			return true, st.add(in.delta)
		default:
			return output.(digest) == st, st
		}
	},
	Equal: func(a, b any) bool { return a.(digest) == b.(digest) },
	DescribeOperation: func(input, output any) string {
		if c, ok := input.(commitIn); ok {
			return fmt.Sprintf("commit %v", c.delta)
		}
		return fmt.Sprintf("read %v", output)
	},
}

// checkLinearizable builds the history: each operation that committed,
// with what its manifests did to the rows (from the store's record of what
// landed), and each successful read of the latest version.
func (w *world) checkLinearizable() error {
	w.emu.Lock()
	events := slices.Clone(w.events)
	w.emu.Unlock()
	var history []porcupine.Operation
	used := make([]bool, len(events))
	var initial digest
	for i, ev := range events {
		if ev.again {
			used[i] = true // taken away again by its committer (checked by manifestTrouble)
		}
		if ev.version == 1 {
			used[i] = true
			initial = ev.delta
		}
	}
	clients := map[string]int{}
	client := func(name string) int {
		if _, ok := clients[name]; !ok {
			clients[name] = len(clients)
		}
		return clients[name]
	}
	for _, op := range w.ops {
		switch {
		case op.commits:
			var d digest
			n := 0
			for i, ev := range events {
				if !used[i] && ev.writer == op.writer && ev.at > op.call && ev.at < op.ret {
					used[i] = true
					d = d.add(ev.delta)
					n++
					if op.steps {
						// A step of its own, in the operation's span: a
						// client of its own, as steps are not sequential
						// calls of one.
						history = append(history, porcupine.Operation{ClientId: client(fmt.Sprintf("%s step %d", op.actor, len(history))),
							Input: commitIn{ev.delta}, Call: op.call, Return: op.ret})
					}
					// A compaction's Rewrite keeps the rows as they are,
					// but one whose outputs garbage collection took while
					// it stalled (and the undoing of it, by itself or by a
					// repair) changes them.
					if op.conserves && ev.kind == format.KindRewrite && !ev.lost && ev.delta != (digest{}) {
						return w.fail("compaction conserves rows", "%s's rewrite at v%d changed the table's rows by %v", op.actor, ev.version, ev.delta)
					}
					if ev.kind == format.KindAlter && ev.delta != (digest{}) {
						return w.fail("a schema change conserves rows", "%s's alter at v%d changed the table's rows by %v", op.actor, ev.version, ev.delta)
					}
				}
			}
			if n > 0 && !op.steps {
				history = append(history, porcupine.Operation{ClientId: client(op.actor), Input: commitIn{d}, Call: op.call, Return: op.ret})
			}
		case op.read != nil && !w.listLag:
			// With lagging listings the latest version may be missed for
			// a moment: reads are stale by design there, and left out.
			history = append(history, porcupine.Operation{ClientId: client(op.actor), Input: readIn{}, Output: op.read.sub(initial), Call: op.call, Return: op.ret})
		}
	}
	for i, ev := range events {
		if !used[i] {
			return w.fail("manifests", "v%d (%s by %q) was made by no operation the harness ran", ev.version, ev.kind, ev.writer)
		}
	}
	w.rep.History = len(history)
	res, info := porcupine.CheckOperationsVerbose(model, history, 20*time.Second)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		w.logf("linearizability check timed out on %d operations", len(history))
		return nil
	}
	_ = info
	return w.fail("linearizability", "the history of %d commits and reads has no sequential explanation", len(history))
}

// provenance names, for each fragment of m that is gone, the version and
// writer that added it.
func (w *world) provenance(m *format.Manifest) string {
	if m == nil {
		return ""
	}
	var b strings.Builder
	for _, f := range m.Fragments {
		if _, err := w.store.Attributes(w.ctx, f.Key); err == nil {
			continue
		}
		fmt.Fprintf(&b, "; fragment %d (%s) is gone", f.ID, randomPart.ReplaceAllString(f.Key, "…"))
		w.emu.Lock()
		for _, ev := range w.events {
			if slices.Contains(ev.added, f.Key) {
				fmt.Fprintf(&b, ", added at v%d by %s (%s, again %v)", ev.version, ev.writer, ev.kind, ev.again)
			}
		}
		w.emu.Unlock()
	}
	return b.String()
}

func addedIDs(m *format.Manifest) []uint64 {
	ids := make([]uint64, len(m.Transaction.Added))
	for i, f := range m.Transaction.Added {
		ids[i] = f.ID
	}
	return ids
}
