package fleetmerge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/internal/plant"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard/wal"
)

// A fleet merge commits the flushed generations of many shards in one
// commit, so that a table's commit rate does not grow with the number of
// its writers. Anyone may run one — the compactor Job does on every pass,
// a server on request, a worker that opts in — while the shards' owners
// go on appending, flushing and even merging on their own:
//
//   - A fleet merge lists every shard's flush objects (one LIST page per
//     thousand), reads the newest of each shard the table's record of it
//     (ShardMark.Seq) does not cover, and takes its generations above the
//     table's watermark for the shard, a contiguous run, since a state
//     lists every generation above the watermark its writer knew. It
//     reads the flush objects that hold them (one GET each: the newest
//     holds the newest generation; within a memory budget, a newest it
//     has no room to keep is read twice, its tail for the state, then
//     whole if the pass takes it: fleetbudget.go) and writes their rows,
//     every shard's, into one fragment (copy.go). Shards an older build
//     flushed announce their generations under _fleet/pending/ and are
//     merged as they were.
//   - The commit records each shard's new watermark and epoch, and the
//     state it drained (Transaction.Merges). It is Whole: applied on a
//     newer version where another merge took some of the generations, or
//     a newer owner merges a shard, it is a conflict, and the merge plans
//     again without what others took.
//   - Afterwards it records the new watermarks (format.MergedKey) that cross
//     a multiple of recordEvery, which the owners read now and then when
//     they flush, and deletes, in one request per thousand, the flush
//     objects merged a minute ago or more and the records made stale.
//     Those are hints or merged copies: losing one delays a cleanup, never
//     changes the table.

// Merge merges the announced generations of every shard in one
// commit, up to each shard's first generation of upserts; then each
// shard's generation of upserts at the head in a commit of its own, in
// the order of the shards' names. While it installed upserts and more
// generations are announced, it makes another such pass (at most
// maxPasses). It makes one LIST when nothing is announced.
func Merge(ctx context.Context, b blob.Bucket, opts *Options) (Result, error) {
	if err := opts.Validate(); err != nil {
		return Result{}, err
	}
	o := opts.withDefaults()
	var total Result
	for range MaxPasses {
		res, again, err := fleetPass(ctx, b, o)
		total.Announced = max(total.Announced, res.Announced)
		total.Generations += res.Generations
		total.Rows += res.Rows
		total.Version = max(total.Version, res.Version)
		total.Failed = append(total.Failed, res.Failed...)
		for shard, w := range res.Merged {
			if total.Merged == nil {
				total.Merged = map[string]uint64{}
			}
			total.Merged[shard] = w
		}
		total.Shards = len(total.Merged)
		total.PeakMemory = max(total.PeakMemory, res.PeakMemory)
		if err != nil || again == 0 {
			return total, err
		}
	}
	return total, nil
}

// fleetPass is one pass of Merge; again counts the generations of
// upserts it installed or left for the next pass, and the shards it left
// to the next pass for its bytes or its memory.
func fleetPass(ctx context.Context, b blob.Bucket, o Options) (res Result, again int, err error) {
	now := time.Now
	if o.Commit.Now != nil {
		now = o.Commit.Now
	}
	hints, err := o.Memory.listAnnounced(ctx, b, now())
	if err != nil {
		return res, 0, err
	}
	flushes, err := wal.ListFlushes(ctx, b)
	if err != nil || len(hints) == 0 && len(flushes) == 0 || o.Memory.quiet(hints, flushes, now()) {
		return res, 0, err
	}
	res.Announced = shardsToLook(hints, flushes)
	base, err := table.ReadLatest(ctx, b)
	if err != nil {
		return res, 0, err
	}
	var doomed []string // deleted at the end, in as few requests as the store allows
	mem := newFleetBudget(o.MemoryBudget)
	plans := readPlans(ctx, b, base, hints, flushes, o, mem)
	for _, p := range plans {
		if p.foreign != "" {
			doomed = append(doomed, p.foreign)
		}
	}
	parts, keyedParts, again, errs := planParts(plans, flushes, o, &res, mem)
	defer releaseParts(keyedParts, mem)
	// Every flush object the parts need, read and checked now: one that
	// cannot be (gone, damaged) holds back its shard alone; one the
	// budget has no room for waits for the next pass.
	parts, failed, later := prefetchCopies(ctx, b, base.Schema(), parts, o.Parallelism, mem)
	defer releaseParts(parts, mem)
	again += later
	for _, f := range failed {
		res.Failed = append(res.Failed, f.shard)
		errs = append(errs, f.err)
	}
	latest := base
	if len(parts) > 0 {
		in, err := Install(ctx, b, base, parts, o.Commit, o.Parallelism, mem.rowGroupBytes())
		if err != nil {
			res.PeakMemory = mem.most(true)
			return res, 0, errors.Join(append(errs, fmt.Errorf("walshard: fleet merge: %w", err))...)
		}
		res.Version, res.Merged, res.Shards, res.Generations, res.Rows = in.Version, in.Merged, len(in.Merged), in.generations, in.rows
		errs = append(errs, in.Errs...)
		doomed = append(doomed, in.Stale...)
		if in.Manifest != nil {
			latest = in.Manifest
		}
		o.Memory.settleDrained(parts, flushes, in.Merged)
	}
	// Then each shard's generation of upserts, one commit each, in the
	// order of the shards' names (each replaces rows by key).
	for _, p := range keyedParts {
		in, err := InstallKeyed(ctx, b, latest, p, o.Commit)
		if err != nil {
			res.Failed = append(res.Failed, p.Shard)
			errs = append(errs, fmt.Errorf("walshard: fleet merge of shard %q's upserts: %w", p.Shard, err))
			continue
		}
		errs = append(errs, in.Errs...)
		if in.Manifest == nil {
			continue
		}
		again++
		latest, res.Version = in.Manifest, in.Version
		if res.Merged == nil {
			res.Merged = map[string]uint64{}
		}
		res.Merged[p.Shard] = in.Merged[p.Shard]
		res.Shards, res.Generations, res.Rows = len(res.Merged), res.Generations+in.generations, res.Rows+in.rows
	}
	// Announcements of generations merged already (by their owner, or a
	// pass whose cleanup failed) go too.
	doomed = append(doomed, staleHints(hints, res.Merged, latest)...)
	// Flush objects all of whose generations are merged go too, a while
	// after (flushKeep), but each shard's newest: it is the shard's state.
	doomed = append(doomed, wal.MergedFlushes(flushes, latest, now())...)
	o.Memory.wait(flushes, latest, now())
	o.Memory.see(plans, latest)
	slices.Sort(doomed) // in one order every time (a simulation replays it)
	if err := blob.DeleteAll(ctx, b, doomed); err != nil {
		errs = append(errs, fmt.Errorf("walshard: deleting stale hints and merged flush objects: %w", err))
	}
	res.PeakMemory = mem.most(len(parts) > 0)
	return res, again, errors.Join(errs...)
}

// planParts turns plans into the parts of a pass: the generations of
// appends of each shard within the pass's bytes, and each shard's next
// generation of upserts apart; again counts the shards whose upserts, or
// whose appends beyond the pass's bytes, make another pass; the shards
// that could not be read go to res.Failed. The flush objects read for
// the plans it makes no part of are given back to mem.
func planParts(plans []fleetPlan, flushes map[string][]wal.ListedFlush, o Options, res *Result, mem *fleetBudget) (parts, keyedParts []ShardPart, again int, errs []error) {
	var bytes int64
	for i := range plans {
		p := &plans[i]
		if part, ok := planPart(p, flushes, o, res, &bytes, &again, &errs); ok {
			dropUnused(&part, mem)
			if len(part.Gens[0].Keys) > 0 {
				keyedParts = append(keyedParts, part)
			} else {
				parts = append(parts, part)
			}
			continue
		}
		mem.give(p.weight)
		p.data, p.weight = nil, 0
	}
	return parts, keyedParts, again, errs
}

// planPart is planParts for one plan: the part it makes, if any.
func planPart(p *fleetPlan, flushes map[string][]wal.ListedFlush, o Options, res *Result, bytes *int64, again *int, errs *[]error) (ShardPart, bool) {
	if fl := flushes[p.shard]; p.err == nil && len(p.gens) == 0 && fl != nil && p.state != nil && p.state.Seq == fl[0].Seq {
		o.Memory.settle(p.shard, fl[0].Seq)
	}
	if p.err != nil {
		res.Failed = append(res.Failed, p.shard)
		*errs = append(*errs, fmt.Errorf("walshard: shard %q: %w", p.shard, p.err))
		return ShardPart{}, false
	}
	if len(p.gens) == 0 {
		return ShardPart{}, false
	}
	if p.upsertsAfter {
		*again++
	}
	part := ShardPart{Shard: p.shard, Epoch: p.state.Epoch, Gens: p.gens, Seq: p.seq, data: p.data, weight: p.weight}
	if len(p.gens[0].Keys) > 0 {
		return part, true
	}
	if *bytes > 0 && *bytes+sumBytes(p.gens) > o.MaxBytes {
		*again++ // the next pass takes it
		return ShardPart{}, false
	}
	*bytes += sumBytes(p.gens)
	return part, true
}

// shardsToLook counts the shards with flush objects or announcements.
func shardsToLook(hints map[string]*hint, flushes map[string][]wal.ListedFlush) int {
	n := len(hints)
	for shard := range flushes {
		if hints[shard] == nil {
			n++
		}
	}
	return n
}

// fleetPlan is what a fleet merge found of one shard: its state and its
// generations above the table's watermark (none when a newer owner merges
// it), or why it could not read them.
type fleetPlan struct {
	// upsertsAfter: a generation of upserts awaits after gens (another
	// pass takes it).
	upsertsAfter bool
	shard        string
	state        *wal.State
	gens         []wal.Generation
	// seq: the state's sequence number, when gens are all it lists
	// above the watermark; data: flush objects read, by key.
	seq  uint64
	data map[string][]byte
	// weight: what data holds of the pass's memory budget.
	weight int64
	err    error
	// foreign: the newest flush object, of a table dropped under this
	// name (State.Table), deleted by the pass.
	foreign string
}

// readPlans reads the newest state of each shard with a flush object the
// table's record of it does not cover (ShardMark.Seq), and of each shard
// an older build announced a generation of, many at once.
func readPlans(ctx context.Context, b blob.Bucket, base *format.Manifest, hints map[string]*hint, flushes map[string][]wal.ListedFlush, o Options, mem *fleetBudget) []fleetPlan {
	var shards []string
	for s, fl := range flushes {
		if hints[s] == nil && o.Memory.isSettled(s, fl[0].Seq) {
			continue
		}
		if fl[0].Seq > base.Shards[s].Seq || hints[s] != nil {
			shards = append(shards, s)
		} else {
			o.Memory.settle(s, fl[0].Seq)
		}
	}
	for s := range hints {
		if flushes[s] == nil {
			shards = append(shards, s)
		}
	}
	slices.Sort(shards)
	plans := make([]fleetPlan, len(shards))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.Parallelism)
	for i, shard := range shards {
		g.Go(func() error {
			plans[i].shard = shard
			var st *wal.State
			var err error
			if fl := flushes[shard]; fl != nil {
				var data []byte
				if st, data, err = mem.readNewest(gctx, b, fl[0]); err == nil && data != nil {
					plans[i].data, plans[i].weight = map[string][]byte{fl[0].Key: data}, int64(len(data))
				}
			} else {
				st, err = stateForHint(gctx, b, shard, hints[shard].seq)
			}
			if err != nil {
				plans[i].err = err
				return nil
			}
			if st.Table != "" && base.TableID != "" && st.Table != base.TableID {
				// A state of a table dropped under this name: not this
				// table's, nor ever to be.
				plans[i].foreign = flushes[shard][0].Key
				return nil
			}
			plans[i].state = st
			mark := base.Shards[shard]
			if mark.Epoch > st.Epoch {
				return nil // a newer owner merges it
			}
			pending := st.Pending(mark.Watermark)
			plans[i].gens = MergePass(pending, o.MaxGenerations, o.MaxBytes)
			plans[i].upsertsAfter = slices.ContainsFunc(pending[len(plans[i].gens):], func(g wal.Generation) bool { return len(g.Keys) > 0 })
			if len(plans[i].gens) == len(pending) {
				plans[i].seq = st.Seq
			}
			return nil
		})
	}
	_ = g.Wait()
	return plans
}

// staleHints returns the announcements of generations at or below the
// watermarks of latest, for the shards this merge did not merge (their
// merges took their own down).
func staleHints(hints map[string]*hint, merged map[string]uint64, latest *format.Manifest) []string {
	var stale []string
	for shard, h := range hints {
		for gen, key := range h.keys {
			if _, done := merged[shard]; gen <= latest.Shards[shard].Watermark && !done {
				stale = append(stale, key)
			}
		}
	}
	return stale
}

// ShardPart is one shard's part of a merge: its generations above the
// table's watermark (a contiguous run), read from a state of epoch; seq
// is that state's sequence number when the run is every generation it
// lists above the watermark (0 otherwise), and data holds the bytes of
// flush objects read already, by key.
type ShardPart struct {
	Shard string
	Epoch uint64
	Gens  []wal.Generation
	Seq   uint64
	data  map[string][]byte
	rows  *flushRows // the flush objects' rows, decoded (prefetchCopies)
	// weight: what the part holds of the pass's memory budget (its data
	// and its rows, decoded or to be).
	weight int64
	// held: the flush objects, read and checked for a copy of their pages
	// (prefetchCopies).
	held map[string]*table.HeldCopy
}

// Installed is what an install did.
type Installed struct {
	Version     uint64            // the version that holds the generations (0: none: others merged them)
	Merged      map[string]uint64 // each shard's watermark after it, for the shards it merged
	generations int
	rows        int64
	Rebases     int              // times the commit caught up with newer versions
	Manifest    *format.Manifest // of version
	Errs        []error          // recording the new watermarks (hints) failed
	Stale       []string         // hints the new records made stale, to delete
}

// InstallKeyed installs part's one generation of upserts on top of base
// (commit.Table.MergeKeyed: its rows replace the table's rows with their
// keys, and the shard's watermark moves in the same commit), then records
// the new watermark (announceMerged), as install does for appends.
func InstallKeyed(ctx context.Context, b blob.Bucket, base *format.Manifest, part ShardPart, co commit.Options) (Installed, error) {
	var in Installed
	g := part.Gens[0]
	t, err := commit.OpenTableAt(b, base, &co)
	if err != nil {
		return in, err
	}
	var res commit.UpsertResult
	for attempt := 0; ; attempt++ {
		// The copy leaves out the named upserts base records; a name
		// installed meanwhile makes the copy again, on the newer version.
		frags, named, known, err := copyKeyed(ctx, b, base, part)
		if err != nil {
			return in, err
		}
		res, err = t.MergeKeyed(ctx, g.Keys, frags, format.ShardMerge{Shard: part.Shard, Watermark: g.Gen, Epoch: part.Epoch, Seq: part.Seq, WAL: g.WALTo}, named, known)
		if err == nil {
			break
		}
		if !commit.IsRetryableConflict(err) || attempt >= 4 || ctx.Err() != nil {
			return in, err
		}
		if base, err = table.ReadLatest(ctx, b); err != nil {
			return in, err
		}
		if t, err = commit.OpenTableAt(b, base, &co); err != nil {
			return in, err
		}
	}
	in.Rebases = res.Rebases
	in.Version = res.Version
	if res.Done {
		return in, nil
	}
	in.Manifest, in.Merged = res.Manifest, map[string]uint64{part.Shard: g.Gen}
	in.generations, in.rows = 1, g.Rows
	if err := announceMerged(ctx, b, part.Shard, base.Shards[part.Shard].Watermark, g.Gen, part.Gens[:1]); err != nil {
		in.Errs = append(in.Errs, err)
	}
	return in, nil
}

// Install is the one installer of flushed generations: it commits the
// parts' generations into the table in one commit on top of base, moving
// each shard's watermark in the same manifest (a transaction of kind merge
// with merges), then records the new watermarks (announceMerged). Applied
// on a newer version, the commit is trimmed to what no other merge took,
// and a shard a newer epoch owns is left out (commit.Apply). A fleet merge
// installs many shards' parts; an owner's merge its own shard's.
func Install(ctx context.Context, b blob.Bucket, base *format.Manifest, parts []ShardPart, co commit.Options, parallelism int, rowGroupBytes int64) (Installed, error) {
	if copies(parts) {
		return installCopies(ctx, b, base, parts, co, parallelism, rowGroupBytes)
	}
	var in Installed
	txn := format.Transaction{Kind: format.KindMerge}
	for _, p := range parts {
		top := p.Gens[len(p.Gens)-1].Gen
		gens := p.Gens
		if plant.On(plant.FleetMergeSkipsAGeneration) && len(gens) > 1 {
			gens = gens[1:] // planted defect: a gap below the watermark
		}
		if old := base.Shards[p.Shard].Watermark; plant.On(plant.MergeForgetsWatermark) && top-1 > old {
			top-- // planted defect: the watermark left below what is added
		}
		txn.Merges = append(txn.Merges, format.ShardMerge{Shard: p.Shard, Watermark: top, Epoch: p.Epoch, Seq: p.Seq, WAL: wal.WALTo(p.Gens)})
		for _, gen := range gens {
			txn.Added = append(txn.Added, gen.Fragments()...)
		}
	}
	began := co.EnsureDefaults().Now()
	if err := markNamed(ctx, b, base, &txn, parts, nil); err != nil {
		return in, err
	}
	co.CatchUp = true
	cres, err := commit.Commit(ctx, b, base, txn, &co)
	if err != nil {
		return in, err
	}
	return committed(ctx, b, base, parts, cres, co, began, in, parallelism)
}

// committed is what an install does once its commit, planned on base at
// began, answered cres: nothing more when a newer commit covered it
// (Done); else the named rows' deletion vectors kept through a stall, and
// the parts' generations recorded as merged (landed).
func committed(ctx context.Context, b blob.Bucket, base *format.Manifest, parts []ShardPart, cres commit.Result, co commit.Options, began time.Time, in Installed, parallelism int) (Installed, error) {
	in.Rebases += cres.Rebases
	if cres.Done {
		in.Version = cres.Version
		return in, nil
	}
	if err := keepNamedVectors(ctx, b, cres, co, began); err != nil {
		in.Errs = append(in.Errs, err)
	}
	return landed(ctx, b, base, parts, cres, in, parallelism)
}

func sumBytes(gens []wal.Generation) int64 {
	var n int64
	for _, g := range gens {
		n += g.Bytes
	}
	return n
}

type hint struct {
	seq  uint64            // the newest state an announcement names
	keys map[uint64]string // announced generation → its announcement
}

// listPending reads every announcement: shard → the newest state named
// and the generations. One LIST page per thousand announcements.
func listPending(ctx context.Context, b blob.Bucket) (map[string]*hint, error) {
	out := map[string]*hint{}
	for o, err := range blob.List(ctx, b, format.FleetPendingDir, 0) {
		if err != nil {
			return nil, err
		}
		shard, gen, seq, ok := format.ParsePendingKey(o.Key)
		if !ok {
			continue
		}
		h := out[shard]
		if h == nil {
			h = &hint{keys: map[uint64]string{}}
			out[shard] = h
		}
		h.seq = max(h.seq, seq)
		h.keys[gen] = o.Key
	}
	return out, nil
}

// stateForHint reads the state an announcement named, or the newest state
// when that one is gone (the owner cleans old states up) or not named.
// An older state is good enough: it lists every generation above the
// watermark its writer knew, up to its newest, so what a merge takes from
// it is a contiguous run.
func stateForHint(ctx context.Context, b blob.Bucket, shard string, seq uint64) (*wal.State, error) {
	l := wal.NewLayout(shard)
	if seq > 0 {
		data, err := b.Get(ctx, l.StateKey(seq))
		if err == nil {
			var s wal.State
			if json.Unmarshal(data, &s) == nil && s.Seq == seq {
				return &s, nil
			}
		} else if !errors.Is(err, blob.ErrNotFound) {
			return nil, err
		}
	}
	return wal.ReadState(ctx, b, l)
}

// LastActivity is when a shard last wrote: its newest WAL entry or state
// (a flush object, or an older build's state object).
func LastActivity(ctx context.Context, b blob.Bucket, l wal.Layout) (time.Time, uint64, error) {
	var last time.Time
	var end uint64
	flushed := false
	for _, dir := range []string{l.WAL(), l.Flushes(), l.States()} {
		if dir == l.States() && flushed {
			break // an older build's states are older than any flush object
		}
		page, err := b.ListPage(ctx, dir, "", 1)
		if err != nil {
			return last, 0, err
		}
		flushed = flushed || dir == l.Flushes() && len(page.Objects) > 0
		for _, o := range page.Objects {
			if o.ModTime.After(last) {
				last = o.ModTime
			}
			if dir == l.WAL() {
				end, _ = wal.ParseLast(dir, o.Key)
			}
		}
	}
	return last, end, nil
}
