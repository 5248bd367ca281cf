package commit

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/internal/backoff"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// UpsertResult is what an upsert did.
type UpsertResult struct {
	Result
	Inserted int64 // rows the upsert wrote (with clauses: whose key the table lacked)
	Replaced int64 // live rows it deleted because a row it wrote has their key
	// With clauses (UpsertWith): the rows written that replaced their
	// key's rows, and the live rows deleted for their key's absence from
	// the upsert's rows.
	Updated int64
	Deleted int64
}

// Upsert writes batches and, in the same commit, deletes every live row
// whose key — its values in the columns keys — one of them has: a key's
// rows become the upsert's row. The batches pass evolve.Conform as an
// append's; a key must not be null, nor appear twice among the rows
// (table.NewKeySet).
//
// Concurrent upserts of one key leave one row for it, that of the upsert
// that committed last: an upsert re-plans when a commit that lands before
// it may have added rows with one of its keys (an append, a merge or an
// upsert whose key columns' statistics meet its own, see Check) or changed
// a fragment it deletes from. Appends never re-plan for an upsert: rows
// appended rather than upserted may share a key.
func (t *Table) Upsert(ctx context.Context, keys []string, batches ...arrow.RecordBatch) (UpsertResult, error) {
	return t.UpsertOnce(ctx, nil, keys, batches...)
}

// UpsertOnce is Upsert named by key (nil: unnamed), safe to send again
// with the same key after losing its answer: an upsert whose name the
// table records is not applied again — it answers the first one's
// version (Duplicate) — so a retry never undoes a later upsert of its
// keys. The window is format.Idempotency's; after it, a retry is a new
// upsert.
func (t *Table) UpsertOnce(ctx context.Context, key *format.Idempotency, keys []string, batches ...arrow.RecordBatch) (UpsertResult, error) {
	in, err := t.readUpsert(ctx, key, keys, batches)
	if err != nil || in.known != nil {
		return in.outcome(), err
	}
	defer releaseAll(in.batches)
	base, batches, ks, name := in.base, in.batches, in.ks, in.name
	var rows int64
	for _, b := range batches {
		rows += b.NumRows()
	}
	if rows == 0 {
		return UpsertResult{Result: Result{Version: base.Version, Done: true}}, nil
	}
	// The rows are written while the keys are looked for (before, when
	// reads go one at a time).
	var f format.Fragment
	var wrote errgroup.Group
	wrote.Go(func() (err error) { f, err = writeKeyed(ctx, t, base.Schema(), keys, batches); return err })
	if t.opts.ReadParallelism == 1 {
		if err := wrote.Wait(); err != nil {
			return UpsertResult{}, err
		}
	}
	var pl upsertPlan
	var replaced int64
	// The first plan reads the version the handle holds: rows that landed
	// since and may hold our keys make the commit plan again (Check), so
	// a stale version costs a plan, never a duplicate. Another commit of
	// these keys winning, planning again at once would race the next one
	// the same way: the plans pause.
	res, err := t.drive(ctx, driveOptions{fromHandle: true, pause: true}, func(ctx context.Context, snap *table.Snapshot, prev error) (Plan, error) {
		var ce *ConflictError
		if errors.As(prev, &ce) && ce.LostData {
			// Garbage collection took our rows while we stalled; the
			// commit was taken back, its deletion vectors with it.
			wrote.Go(func() (err error) { f, err = writeKeyed(ctx, t, base.Schema(), keys, batches); return err })
			if t.opts.ReadParallelism == 1 {
				// One request at a time, as the first write: the rows
				// land before the next plan's vectors are written.
				if err := wrote.Wait(); err != nil {
					return Plan{}, err
				}
			}
		}
		if err := schemaMoved(snap, base, "written"); err != nil {
			return Plan{}, err
		}
		matches, err := pl.plan(ctx, snap, ks, t.opts.ReadParallelism)
		if err != nil {
			return Plan{}, err
		}
		p := Plan{Txn: format.Transaction{Kind: format.KindUpsert, CommitID: format.NewID(), ReadVersion: snap.Version(),
			Keys: evolve.StoredNames(base.Schema(), keys), Idempotency: name}, written: t.opts.Now()}
		// The vectors are written while the rows still are.
		p.Txn.Deletions, p.bodies, replaced, err = t.writeVectors(ctx, snap, matches)
		if err = errors.Join(err, wrote.Wait()); err != nil {
			return Plan{}, err
		}
		p.Txn.Added = []format.Fragment{f}
		return p, nil
	})
	if err != nil {
		// The rows' write may still run (a plan that failed before it
		// waited): it ends before the upsert answers.
		if werr := wrote.Wait(); werr != nil && !errors.Is(err, werr) {
			err = errors.Join(err, werr)
		}
		return UpsertResult{}, err
	}
	return UpsertResult{Result: res, Inserted: rows, Replaced: replaced}, nil
}

// upsertInput is what an upsert (with clauses or without) reads of its
// rows before it plans: the version they conform to, the rows conformed
// (the caller releases them), their keys (none null, none twice), and
// its name; or, for a name the table records, the first one's outcome
// (known; nothing to release).
type upsertInput struct {
	base    *format.Manifest
	batches []arrow.RecordBatch
	ks      *table.KeySet
	name    *format.AppendKey
	known   *Result
}

func (t *Table) readUpsert(ctx context.Context, key *format.Idempotency, keys []string, batches []arrow.RecordBatch) (upsertInput, error) {
	base, batches, err := t.conformLatest(ctx, t.base(), batches)
	if err != nil {
		return upsertInput{}, err
	}
	in := upsertInput{base: base, batches: batches}
	if in.ks, err = table.NewKeySet(base.Schema(), keys, batches); err == nil {
		in.name, in.known, err = t.knownName(ctx, base, key, batches)
	}
	if err != nil || in.known != nil {
		releaseAll(batches)
		in.batches = nil
	}
	return in, err
}

// outcome is the answer of an upsert that ends before it plans: the
// first one's, for a name the table records.
func (in upsertInput) outcome() UpsertResult {
	if in.known == nil {
		return UpsertResult{}
	}
	return UpsertResult{Result: *in.known}
}

// schemaMoved is the conflict of an upsert whose rows were conformed to
// base's schema (and then done, "written" or "read") when an alter or an
// overwrite changed it since.
func schemaMoved(snap *table.Snapshot, base *format.Manifest, done string) error {
	if snap.Manifest().Schema().Equal(base.Schema()) {
		return nil
	}
	return &ConflictError{Ours: format.Transaction{Kind: format.KindUpsert}, Version: snap.Version(),
		Reason: "the table's schema changed (an alter or an overwrite) after the upsert's rows were " + done + "; send the upsert again"}
}

// knownName is key as a transaction records it (nil for no key), and,
// when base records it as stored (and no version took it back, see
// checkDuplicate), the first outcome.
func (t *Table) knownName(ctx context.Context, base *format.Manifest, key *format.Idempotency, batches []arrow.RecordBatch) (*format.AppendKey, *Result, error) {
	if key == nil {
		return nil, nil, nil
	}
	name, err := appendKey(*key, base.Schema(), batches, t.opts.Now())
	if err != nil {
		return nil, nil, err
	}
	o, found, err := base.Producers.Lookup(*name)
	if err != nil || !found {
		return name, nil, err
	}
	why, err := checkDuplicate(ctx, t.b, base, *name, o.At, t.opts)
	if err != nil {
		return nil, nil, err
	}
	if why == duplicateStands {
		return name, &Result{Version: o.At, Done: true, Duplicate: true, Rows: o.Rows}, nil
	}
	return name, nil, nil
}

// upsertPlan is what an upsert's plans found so far: planned again, only
// the fragments new since the last plan are read (a fragment's rows never
// change); a fragment gone since (a compaction) means reading again.
type upsertPlan struct {
	found map[uint64][]uint32         // rows with the keys, by fragment
	seen  map[uint64]*format.Deletion // the fragments read for them, and the vector each had
}

// plan returns the new deletion vectors of the rows of snap with the keys
// of ks. Planning again, it reads only the fragments it has not read, and
// those whose vector lost rows since (an undo gave them back: rows it
// passed over as deleted may hold its keys).
func (pl *upsertPlan) plan(ctx context.Context, snap *table.Snapshot, ks *table.KeySet, parallelism int) (map[uint64][]uint32, error) {
	m := snap.Manifest()
	var only []uint64
	if pl.found != nil {
		only = []uint64{}
		for i := range m.Fragments {
			f := &m.Fragments[i]
			was, ok := pl.seen[f.ID]
			if !ok {
				only = append(only, f.ID)
				continue
			}
			lost, err := rowsGivenBack(ctx, snap, f, was)
			if err != nil {
				return nil, err
			}
			if lost {
				only = append(only, f.ID)
			}
		}
		for id := range pl.found {
			if m.Fragment(id) == nil {
				pl.found, only = nil, nil
				break
			}
		}
	}
	more, err := snap.KeyRows(ctx, ks, parallelism, only)
	if err != nil {
		return nil, err
	}
	if pl.found == nil {
		pl.found = map[uint64][]uint32{}
	}
	maps.Copy(pl.found, more)
	pl.seen = map[uint64]*format.Deletion{}
	for i := range m.Fragments {
		pl.seen[m.Fragments[i].ID] = m.Fragments[i].Deletion
	}
	return snap.LiveDeletions(ctx, pl.found, parallelism)
}

// rowsGivenBack says whether f, whose deletion vector was was when it was
// read, now has rows live that was deleted.
func rowsGivenBack(ctx context.Context, snap *table.Snapshot, f *format.Fragment, was *format.Deletion) (bool, error) {
	switch {
	case was == nil:
		return false, nil
	case f.Deletion == nil:
		return true, nil
	case f.Deletion.Key == was.Key:
		return false, nil
	}
	before := *f
	before.Deletion = was
	old, err := format.ReadDeletionsCached(ctx, snap.Bucket(), &before)
	if err != nil {
		return false, err
	}
	now, err := format.ReadDeletionsCached(ctx, snap.Bucket(), f)
	if err != nil {
		return false, err
	}
	for _, r := range old {
		if _, ok := slices.BinarySearch(now, r); !ok {
			return true, nil
		}
	}
	return false, nil
}

// writeVectors writes the new deletion vectors of matches (whole vectors,
// by fragment id) for a commit on top of snap, a few at once. It returns
// them as a transaction lists them, their bodies by key, and the rows
// they delete that were live.
func (t *Table) writeVectors(ctx context.Context, snap *table.Snapshot, matches map[uint64][]uint32) ([]format.FragmentDeletion, map[string][]byte, int64, error) {
	ids := slices.Sorted(maps.Keys(matches))
	dels := make([]format.FragmentDeletion, len(ids))
	bodies := make(map[string][]byte, len(ids))
	var n int64
	for i, id := range ids {
		key := format.DeletionKey(id, snap.Version()+1)
		bodies[key] = format.EncodeDeletions(matches[id])
		dels[i] = format.FragmentDeletion{FragmentID: id, Deletion: format.Deletion{Key: key, Count: int64(len(matches[id]))}}
		n += int64(len(matches[id]))
		if f := snap.Manifest().Fragment(id); f.Deletion != nil {
			n -= f.Deletion.Count
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cmp.Or(t.opts.ReadParallelism, 8))
	for _, d := range dels {
		g.Go(func() error { return t.b.PutIfAbsent(gctx, d.Deletion.Key, bodies[d.Deletion.Key]) })
	}
	return dels, bodies, n, g.Wait()
}

// replanPause waits before plan n+1 of an operation whose plan n lost
// to a commit of the same rows after took: a jittered exponential pause
// that starts at half a plan's time and grows to eight plans' (bounded by
// maxReplanPause), so that writers contending for the same keys through a
// slow store spread out rather than collide again and again (four
// upserting four hot keys through 20 ms round trips gave up 2 times in
// 40 with pauses of at most the options' backoff).
func replanPause(ctx context.Context, o Options, n int, took time.Duration) {
	took = min(took, maxReplanPause/8)
	_ = backoff.Sleep(ctx, backoff.Policy{Base: max(o.BaseBackoff, took/2), Max: max(o.MaxBackoff, 8*took)}.Delay(n))
}

// maxReplanPause bounds a pause between plans.
const maxReplanPause = 2 * time.Second

// writeKeyed writes an upsert's rows as one fragment and remembers their
// keys (table.RememberKeys), so that a later upsert of this process finds
// them without reading the fragment.
func writeKeyed(ctx context.Context, t *Table, sc *arrow.Schema, keys []string, batches []arrow.RecordBatch) (format.Fragment, error) {
	f, err := fragment.Write(ctx, t.b, sc, batches...)
	if err == nil {
		table.RememberKeys(f.Key, sc, keys, batches)
	}
	return f, err
}
