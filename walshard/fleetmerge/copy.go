package fleetmerge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/walshard/wal"
)

// Merging by copy. A flush object holds a shard's state and the rows of
// the generation it made; it lives under _fleet/flush/, where one LIST
// finds every shard's, and it is deleted once merged. So it never joins
// the table as it is: a merge reads it (one GET, the only read of it a
// fleet merge makes) and writes its rows, with those of every other shard
// the merge takes, into one fragment of the table. Such a fragment holds
// several shards' rows and cannot be trimmed to what other merges left:
// its commit is Whole, applied from the watermarks it was planned on or
// not at all, and planned again without what others took.
//
// The flush objects' pages are copied into the fragment as they are
// (table.CheckHeld, table.WriteHeldCopies): each page is read back and
// checked, none decoded and encoded again. Objects written under another
// schema than the table's now (a column added since they were flushed)
// are decoded, and their rows written as the table's schema reads them.

// copies tells whether any generation of parts has rows in a flush object.
func copies(parts []ShardPart) bool {
	for _, p := range parts {
		for _, g := range p.Gens {
			for _, f := range g.Fragments() {
				if wal.InFlush(f.Key) {
					return true
				}
			}
		}
	}
	return false
}

// flushRows reads the rows of the flush objects keys (data holds those
// read already, by key), many at once, as rows of schema.
type flushRows struct {
	mu   sync.Mutex
	rows map[string][]arrow.RecordBatch
	// borrowed: rows a part's prefetch holds (not released here).
	borrowed map[string][]arrow.RecordBatch
}

// of returns the rows of flush object key.
func (r *flushRows) of(key string) []arrow.RecordBatch {
	if recs, ok := r.borrowed[key]; ok {
		return recs
	}
	return r.rows[key]
}

func (r *flushRows) release() {
	for _, recs := range r.rows {
		fragment.ReleaseAll(recs)
	}
	r.rows, r.borrowed = nil, nil
}

// partFailure is a part prefetchCopies could not read.
type partFailure struct {
	shard string
	err   error
}

// prefetchCopies reads and checks, for each of parts, the flush objects
// its generations need (into the part's held copies; decoded into its
// rows when they cannot be copied), many parts at once; a part
// whose objects cannot be read or decoded is left out, and returned among
// the failed, so that it holds back no other. Within mem, parts are taken
// in order while what they read, and what they decode, fits (the first
// alone past it); later counts those left to the next pass.
func prefetchCopies(ctx context.Context, b blob.Bucket, schema *arrow.Schema, parts []ShardPart, parallelism int, mem *fleetBudget) (kept []ShardPart, failed []partFailure, later int) {
	parts, later = admitParts(parts, mem, toRead)
	errs := make([]error, len(parts))
	eachCopying(parts, parallelism, func(i int) {
		parts[i].held, errs[i] = readHeld(ctx, b, schema, &parts[i])
	})
	for i, p := range parts {
		if errs[i] != nil {
			failed = append(failed, partFailure{shard: p.Shard, err: errs[i]})
			releaseParts(parts[i:i+1], mem)
			continue
		}
		kept = append(kept, p)
	}
	if mem != nil && !allHeld(kept) {
		// Every part's rows are decoded: each weighs them too.
		var n int
		kept, n = admitParts(kept, mem, decodedOf)
		later += n
	}
	errs = make([]error, len(kept))
	eachCopying(kept, parallelism, func(i int) {
		if kept[i].held == nil {
			kept[i].rows, errs[i] = readFlushRows(ctx, b, schema, kept[i:i+1], 1)
		}
	})
	parts, kept = kept, nil
	for i, p := range parts {
		if errs[i] != nil {
			failed = append(failed, partFailure{shard: p.Shard, err: errs[i]})
			releaseParts(parts[i:i+1], mem)
			continue
		}
		kept = append(kept, p)
	}
	return kept, failed, later
}

// eachCopying calls fn for each of parts with rows in flush objects,
// parallelism at once.
func eachCopying(parts []ShardPart, parallelism int, fn func(i int)) {
	var g errgroup.Group
	g.SetLimit(max(parallelism, 1))
	for i := range parts {
		if copies(parts[i : i+1]) {
			g.Go(func() error { fn(i); return nil })
		}
	}
	_ = g.Wait()
}

// readHeld reads and checks the flush objects of part's generations for
// a copy of their pages; nil when one was written otherwise (they are
// decoded then). The objects read, all of them, are kept in part.data.
func readHeld(ctx context.Context, b blob.Bucket, schema *arrow.Schema, part *ShardPart) (map[string]*table.HeldCopy, error) {
	held := map[string]*table.HeldCopy{}
	copyable := true
	for _, gen := range part.Gens {
		for _, f := range gen.Fragments() {
			if !wal.InFlush(f.Key) || f.Rows == 0 {
				continue
			}
			data := part.data[f.Key]
			if data == nil {
				var err error
				if data, err = b.Get(ctx, f.Key); err != nil {
					return nil, fmt.Errorf("walshard: shard %q: reading flush object %q: %w", part.Shard, f.Key, err)
				}
				if part.data == nil {
					part.data = map[string][]byte{}
				}
				part.data[f.Key] = data
			}
			if !copyable {
				continue // read for its rows, decoded
			}
			h, err := table.CheckHeld(schema, f.Key, data, f.Rows, f.Columns, wal.StateFooterKey)
			if errors.Is(err, table.ErrNotCopyable) {
				copyable = false
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("walshard: shard %q: %w", part.Shard, err)
			}
			held[f.Key] = h
		}
	}
	if !copyable {
		return nil, nil
	}
	return held, nil
}

// allHeld tells whether every flush object of parts' generations that
// holds rows has a held copy (prefetchCopies).
func allHeld(parts []ShardPart) bool {
	for _, p := range parts {
		for _, g := range p.Gens {
			for _, f := range g.Fragments() {
				if wal.InFlush(f.Key) && f.Rows > 0 && p.held[f.Key] == nil {
					return false
				}
			}
		}
	}
	return true
}

// releaseParts lets go of the rows prefetchCopies read for parts, and
// gives back to mem what they held of it.
func releaseParts(parts []ShardPart, mem *fleetBudget) {
	for i := range parts {
		if parts[i].rows != nil {
			parts[i].rows.release()
		}
		mem.give(parts[i].weight)
		parts[i].weight = 0
	}
}

// readFlushRows reads the rows of every flush object the generations of
// parts hold, as rows of schema: from the part's rows when prefetched
// (prefetchCopies), else from its data when it has the object's bytes,
// else with one GET each. Prefetched rows stay the part's to release.
func readFlushRows(ctx context.Context, b blob.Bucket, schema *arrow.Schema, parts []ShardPart, parallelism int) (*flushRows, error) {
	r := &flushRows{rows: map[string][]arrow.RecordBatch{}, borrowed: map[string][]arrow.RecordBatch{}}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(parallelism, 1))
	for _, p := range parts {
		for _, gen := range p.Gens {
			for _, f := range gen.Fragments() {
				if !wal.InFlush(f.Key) {
					continue
				}
				if p.rows != nil {
					if recs, ok := p.rows.rows[f.Key]; ok {
						r.borrowed[f.Key] = recs
						continue
					}
				}
				g.Go(func() error {
					data := p.data[f.Key]
					if data == nil {
						var err error
						if data, err = b.Get(gctx, f.Key); err != nil {
							return fmt.Errorf("walshard: shard %q: reading flush object %q: %w", p.Shard, f.Key, err)
						}
					}
					recs, err := decodeFlushRows(p.Shard, f.Key, data, schema)
					if err != nil {
						return err
					}
					r.mu.Lock()
					r.rows[f.Key] = recs
					r.mu.Unlock()
					return nil
				})
			}
		}
	}
	if err := g.Wait(); err != nil {
		r.release()
		return nil, err
	}
	return r, nil
}

// decodeFlushRows decodes the rows of a flush object as rows of schema
// (by stored name, as an older fragment of the table is read).
func decodeFlushRows(shard, key string, data []byte, schema *arrow.Schema) ([]arrow.RecordBatch, error) {
	recs, err := fragment.Decode(context.Background(), key, data)
	if err != nil {
		return nil, err
	}
	e, err := wal.ConformEntry(shard, key, 0, &wal.Entry{Kind: wal.KindData, Batches: recs}, schema, true)
	if err != nil {
		return nil, err
	}
	return e.Batches, nil
}

// installCopies is install for parts some of whose generations are in
// flush objects: their rows go, copied, into one new fragment of the
// table; the generations' other objects (WAL entries reused as parts,
// generations of older builds) join as they are.
func installCopies(ctx context.Context, b blob.Bucket, base *format.Manifest, parts []ShardPart, co commit.Options, parallelism int, rowGroupBytes int64) (Installed, error) {
	var in Installed
	var rows *flushRows // nil: the flush objects' pages are copied
	decode := func() error {
		var err error
		rows, err = readFlushRows(ctx, b, base.Schema(), parts, parallelism)
		return err
	}
	for i := range parts {
		if parts[i].held == nil && parts[i].rows == nil && copies(parts[i:i+1]) {
			// Not prefetched (an owner's merge): read and checked here.
			held, err := readHeld(ctx, b, base.Schema(), &parts[i])
			if err != nil {
				return in, err
			}
			parts[i].held = held
		}
	}
	if !allHeld(parts) {
		if err := decode(); err != nil {
			return in, err
		}
	}
	defer func() {
		if rows != nil {
			rows.release()
		}
	}()
	co.CatchUp = true
	var began time.Time
	cres, err := commit.Drive(ctx, b, base, &co, maxCopyPlans, func(ctx context.Context, m *format.Manifest, prev error) (commit.Plan, error) {
		if prev != nil {
			// Another merge took some of these generations, or a newer
			// owner merges a shard now: plan again on the latest version,
			// without what is merged already.
			base, parts = m, replan(m, parts)
		}
		if len(parts) == 0 {
			return commit.Plan{Done: true}, nil
		}
		began = co.EnsureDefaults().Now()
		txn, err := copyTxn(ctx, b, base, parts, rows, rowGroupBytes)
		if errors.Is(err, table.ErrNotCopyable) && rows == nil {
			// The table's schema changed since the copies were checked.
			if err = decode(); err == nil {
				txn, err = copyTxn(ctx, b, base, parts, rows, rowGroupBytes)
			}
		}
		return commit.Plan{Txn: txn}, err
	})
	if errors.Is(err, commit.ErrBudget) {
		return in, fmt.Errorf("walshard: merge of copies kept conflicting: %w", err)
	}
	if err != nil {
		return in, err
	}
	return committed(ctx, b, base, parts, cres, co, began, in, parallelism)
}

// maxCopyPlans bounds the plans of one merge of copies.
const maxCopyPlans = 8

// replan fits parts to base: a shard a newer owner merges goes, and a
// shard others merged further keeps its generations above the watermark.
func replan(base *format.Manifest, parts []ShardPart) []ShardPart {
	var out []ShardPart
	for _, p := range parts {
		mark := base.Shards[p.Shard]
		if mark.Epoch > p.Epoch {
			continue
		}
		i := slices.IndexFunc(p.Gens, func(g wal.Generation) bool { return g.Gen > mark.Watermark })
		if i < 0 {
			continue
		}
		p.Gens = p.Gens[i:]
		out = append(out, p)
	}
	return out
}

// copyTxn writes the rows of parts' flush objects as one fragment of
// base's schema — their pages copied when rows is nil, else the rows
// decoded — and returns the Whole merge that adds it, with the
// generations' other objects.
func copyTxn(ctx context.Context, b blob.Bucket, base *format.Manifest, parts []ShardPart, rows *flushRows, rowGroupBytes int64) (format.Transaction, error) {
	txn := format.Transaction{Kind: format.KindMerge, Whole: true}
	var batches []arrow.RecordBatch
	var held []*table.HeldCopy
	moved := map[string]placed{}
	var copied int64 // rows of the flush objects before this one
	for _, p := range parts {
		top := p.Gens[len(p.Gens)-1].Gen
		sm := format.ShardMerge{Shard: p.Shard, Watermark: top, Epoch: p.Epoch, From: base.Shards[p.Shard].Watermark}
		sm.Seq, sm.WAL = p.Seq, wal.WALTo(p.Gens)
		txn.Merges = append(txn.Merges, sm)
		for _, g := range p.Gens {
			for _, f := range g.Fragments() {
				if wal.InFlush(f.Key) {
					moved[f.Key] = placed{offset: copied}
					copied += f.Rows
				}
				switch {
				case wal.InFlush(f.Key) && rows == nil:
					if h := p.held[f.Key]; h != nil {
						held = append(held, h)
					}
				case wal.InFlush(f.Key):
					batches = append(batches, rows.of(f.Key)...)
				default:
					txn.Added = append(txn.Added, f)
				}
			}
		}
	}
	if len(batches) == 0 && len(held) == 0 {
		return txn, markNamed(ctx, b, base, &txn, parts, nil)
	}
	p := parts[0]
	var frag format.Fragment
	var err error
	if rows == nil {
		frag, err = table.WriteHeldCopies(ctx, b, base.Schema(), wal.NewLayout(p.Shard).GenKey(p.Gens[len(p.Gens)-1].Gen, p.Epoch), held, rowGroupBytes, wal.StateFooterKey)
	} else {
		frag, err = writeCopy(ctx, b, base.Schema(), p.Shard, p.Gens[len(p.Gens)-1].Gen, p.Epoch, batches)
	}
	if err != nil {
		return txn, fmt.Errorf("walshard: writing the merged rows of flush objects: %w", err)
	}
	txn.Added = append([]format.Fragment{frag}, txn.Added...)
	for k, pl := range moved {
		moved[k] = placed{key: frag.Key, offset: pl.offset}
	}
	return txn, markNamed(ctx, b, base, &txn, parts, moved)
}

// landed is what install does after its commit landed: it counts what it
// merged and records the new watermarks (hints for the owners); the
// hints that made stale are in.stale.
func landed(ctx context.Context, b blob.Bucket, base *format.Manifest, parts []ShardPart, cres commit.Result, in Installed, parallelism int) (Installed, error) {
	gensOf := map[string][]wal.Generation{}
	for _, p := range parts {
		gensOf[p.Shard] = p.Gens
	}
	in.Version, in.Manifest, in.Merged = cres.Version, cres.Manifest, map[string]uint64{}
	for _, m := range cres.Manifest.Transaction.Merges {
		in.Merged[m.Shard] = m.Watermark
		for _, gen := range gensOf[m.Shard] {
			if gen.Gen > base.Shards[m.Shard].Watermark && gen.Gen <= m.Watermark {
				in.generations++
				in.rows += gen.Rows
			}
		}
	}
	// Record the new watermarks, many at once (a fleet has many shards);
	// the hints they made stale are the caller's to take down, with what
	// else it deletes, in as few requests as the store allows.
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(parallelism, 1))
	for _, m := range cres.Manifest.Transaction.Merges {
		g.Go(func() error {
			from := base.Shards[m.Shard].Watermark
			err := recordMerged(gctx, b, m.Shard, from, m.Watermark)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				in.Errs = append(in.Errs, err)
			} else {
				in.Stale = append(in.Stale, mergedHints(m.Shard, from, m.Watermark, gensOf[m.Shard])...)
			}
			return nil
		})
	}
	_ = g.Wait()
	return in, nil
}

// writeCopy writes batches, rows copied from flush objects, as a new
// fragment named as a generation of shard (gen, of epoch): garbage
// collection leaves such an object alone while the shard's watermark is
// below gen, as it does any generation, so that a merge whose commit
// stalls finds it when the commit lands (a merge waits on no other of
// the shard: a later merge of it lands after this one, or instead).
func writeCopy(ctx context.Context, b blob.Bucket, schema *arrow.Schema, shard string, gen, epoch uint64, batches []arrow.RecordBatch) (format.Fragment, error) {
	w, err := fragment.NewWriterAt(ctx, b, schema, wal.NewLayout(shard).GenKey(gen, epoch))
	if err != nil {
		return format.Fragment{}, err
	}
	for _, rec := range batches {
		if err := w.Write(rec); err != nil {
			w.Abort()
			return format.Fragment{}, err
		}
	}
	return w.Close()
}
