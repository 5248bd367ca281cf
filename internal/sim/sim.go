// Package sim runs seeded simulations of many actors working on one table
// while the object store misbehaves, and checks that nothing acknowledged
// is ever lost or doubled.
//
// One seed decides everything: how many shard writers, direct appenders
// and compactors there are, which operation runs next, which requests fail
// and how, and where one actor's operation is suspended while others run.
// Actors take turns on one logical thread. An operation is suspended at a
// request to the store (before the request is made): the harness then runs
// other actors' operations to completion, nested, and lets the suspended
// request go on. That is how commits race, how a fencer opens a shard under
// a writer in the middle of an append, and how a writer stalls past garbage
// collection: the clock moves on by hours, GC runs, and the stalled commit
// resumes. Because no two actors run at once, a seed replays the same
// schedule.
//
// The store (Store) is in memory, on the simulation's clock, and can make
// listings lag behind creates. Faults come from blob/fault, one wrapper per
// actor: retryable errors, latency, lost responses to writes that landed,
// 412 after a create that landed, 409 ConditionalRequestConflict, and
// crashes after which the actor restarts as a new process would.
//
// Oracles, checked as the run goes and at its end:
//
//   - every acknowledged row appears exactly once in a fresh read of its
//     shard and, after a final drain, compaction and GC, in the base table;
//     rows whose append failed appear at most once; rows a fenced writer
//     was refused never appear; no row appears that nobody wrote, and every
//     row reads back with its value and its blob (up to 1 KiB) intact;
//   - a pinned version's rows never change while it is retained, and a
//     tagged version stays readable;
//   - no manifest is overwritten, and no deleted version comes back;
//   - a compaction's Rewrite conserves the rows (count and hashes);
//   - the history of commits and reads of the latest version is
//     linearizable (porcupine) against a sequential table whose state is
//     the multiset of its rows (left out when listings lag: reading the
//     latest version through a lagging listing is stale by design);
//   - every seed finishes (Campaign reports one that hangs).
package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

// Config sets up one run. Everything else follows from the seed.
type Config struct {
	Seed uint64
	// Steps is the number of top-level operations (default 60); nested
	// operations run at suspension points come on top.
	Steps int
	// Trace, if set, receives each trace line as it happens.
	Trace func(string)
}

// Report says what a run did.
type Report struct {
	Seed   uint64
	Setup  string         // the actors and faults the seed chose
	Ops    map[string]int // operations run, by kind (nested ones included)
	Faults map[string]int // faults injected, by kind
	// Stalls: suspensions past the GC safety age; Preemptions: other
	// suspensions; ListOmissions: keys a listing left out.
	Stalls, Preemptions int
	ListOmissions       int64
	RowsAcked           int   // rows acknowledged
	RowsChecked         int64 // rows read back and checked, over every read
	History             int   // operations in the linearizability check
	Trace               []string
}

// Violation is an oracle that failed.
type Violation struct {
	Seed   uint64
	Setup  string // what the seed chose
	Oracle string
	Detail string
	Trace  []string // the operations that led there
}

func (v *Violation) Error() string {
	return fmt.Sprintf("seed %d (%s): %s: %s", v.Seed, v.Setup, v.Oracle, v.Detail)
}

// Run runs one simulation. It returns a *Violation when an oracle fails,
// and another error only when the harness itself cannot go on.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Steps <= 0 {
		cfg.Steps = 60
	}
	w := newWorld(ctx, cfg)
	err := w.run()
	w.rep.ListOmissions = w.store.Omitted()
	w.rep.Trace = w.trace
	var v *Violation
	if errors.As(err, &v) {
		v.Seed, v.Setup, v.Trace = cfg.Seed, w.rep.Setup, w.trace
	}
	return w.rep, err
}

type actorKind int

const (
	kShard actorKind = iota
	kDirect
	kCompactor
	kGC
	kReader
	kFencer
)

type actor struct {
	name string
	kind actorKind
	idx  int
	inc  int // incarnation: a restart after a crash starts the next one
	busy bool
	// The current operation's suspension: at its suspendAt-th suspendable
	// request, or (stallAt) at its first create of a manifest.
	suspendAt int64
	stallAt   bool
	requests  atomic.Int64
	suspended atomic.Bool

	bucket  *fault.Bucket
	restart bool // crashed or fenced: open anew before the next operation

	shard  *walshard.Shard
	zombie *walshard.Shard // a fenced handle, tried once more, then closed
	next   *walshard.Shard // a handle a fencer opened while this one was busy
	tbl    *commit.Table
	pins   []pin
}

func (a *actor) writer() string { return fmt.Sprintf("%s#%d", a.name, a.inc) }

type pin struct {
	version uint64
	tagged  bool
	rows    digest
}

// opRecord is one operation in the history.
type opRecord struct {
	actor     string
	writer    string // the committer name its commits carry
	call, ret int64
	commits   bool    // may commit to the table
	conserves bool    // a compaction: its commits must not change the rows
	read      *digest // a read of the latest version that succeeded
}

// manifestEvent is one manifest created in the store.
type manifestEvent struct {
	at      int64
	version uint64
	writer  string
	kind    table.Kind
	delta   digest
	lost    bool // a fragment it adds was gone when it landed, or one it removes had been
	added   []string
	// again: the version had been created before (and collected); a
	// stalled commit brought it back and must take it away again.
	again bool
}

type world struct {
	ctx   context.Context
	cfg   Config
	clock *Clock
	store *Store

	// Setup, from the seed.
	shards, directs, compactors int
	pFault, pCrash, pPreempt    float64
	pStall                      float64
	listLag                     bool

	mu     sync.Mutex // guards rng, rep counters, trace
	rng    *rand.Rand
	rep    Report
	trace  []string
	actors []*actor
	stack  []*actor // operations in progress, innermost last
	depth  atomic.Int32
	final  atomic.Bool
	clockT atomic.Int64 // logical time of calls, returns and manifests

	nextID    int64
	acked     map[int64]bool
	maybe     map[int64]bool
	forbidden map[int64]bool
	shardRows []map[int64]bool // rows acknowledged by each shard actor

	ops       []opRecord
	emu       sync.Mutex
	events    []manifestEvent
	fragRows  map[uint64]digest // fragment id -> its rows
	fragLost  map[uint64]bool
	violation error
	tags      int
}

func newWorld(ctx context.Context, cfg Config) *world {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5157))
	w := &world{ctx: ctx, cfg: cfg, clock: &Clock{}, rng: rng,
		acked: map[int64]bool{}, maybe: map[int64]bool{}, forbidden: map[int64]bool{},
		fragRows: map[uint64]digest{}, fragLost: map[uint64]bool{}}
	w.shards = 1 + rng.IntN(3)
	w.directs = rng.IntN(3)
	w.compactors = 1 + rng.IntN(2)
	w.pFault = []float64{0, 0.02, 0.05}[rng.IntN(3)]
	w.pCrash = []float64{0, 0.003}[rng.IntN(2)]
	w.pPreempt = []float64{0.15, 0.35}[rng.IntN(2)]
	w.pStall = []float64{0, 0.05, 0.15}[rng.IntN(3)]
	w.listLag = rng.IntN(4) == 0
	w.store = NewStore(w.clock, w.listLag, cfg.Seed)
	w.store.onCreate = w.manifestCreated
	w.rep = Report{Seed: cfg.Seed, Ops: map[string]int{}, Faults: map[string]int{}}
	w.rep.Setup = fmt.Sprintf("%d shards, %d direct appenders, %d compactors; faults p=%.2f, crashes p=%.3f; suspended operations p=%.2f, stalled commits p=%.2f; listings lag: %v",
		w.shards, w.directs, w.compactors, w.pFault, w.pCrash, w.pPreempt, w.pStall, w.listLag)
	add := func(kind actorKind, name string, n int) {
		for i := range n {
			w.actors = append(w.actors, &actor{name: fmt.Sprintf("%s-%d", name, i), kind: kind, idx: i})
		}
	}
	add(kShard, "shard", w.shards)
	add(kDirect, "direct", w.directs)
	add(kCompactor, "compactor", w.compactors)
	add(kGC, "gc", 1)
	add(kReader, "reader", 2)
	add(kFencer, "fencer", 1)
	w.shardRows = make([]map[int64]bool, w.shards)
	for i := range w.shardRows {
		w.shardRows[i] = map[int64]bool{}
	}
	return w
}

func (w *world) logf(format string, args ...any) {
	line := strings.Repeat("  ", int(w.depth.Load())) + fmt.Sprintf(format, args...)
	line = ulids.ReplaceAllString(line, "…")
	w.mu.Lock()
	w.trace = append(w.trace, line)
	w.mu.Unlock()
	if w.cfg.Trace != nil {
		w.cfg.Trace(line)
	}
}

func (w *world) fail(oracle, format string, args ...any) error {
	v := &Violation{Oracle: oracle, Detail: fmt.Sprintf(format, args...)}
	w.mu.Lock()
	if w.violation == nil {
		w.violation = v
	}
	w.mu.Unlock()
	w.logf("VIOLATION %s: %s", oracle, v.Detail)
	return v
}

func (w *world) intn(n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rng.IntN(n)
}

func (w *world) chance(p float64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rng.Float64() < p
}

func (w *world) run() error {
	if _, err := commit.Create(w.ctx, w.store, schema, nil, nil); err != nil {
		return err
	}
	for _, a := range w.actors {
		w.newBucket(a)
	}
	w.logf("seed %d: %s", w.cfg.Seed, w.rep.Setup)
	for step := range w.cfg.Steps {
		a := w.pickTop()
		w.logf("step %d: %s", step, a.name)
		w.runOp(a)
		if err := w.checkQuiet(); err != nil {
			return err
		}
		if w.violation != nil {
			return w.violation
		}
	}
	if err := w.finish(); err != nil {
		return err
	}
	return w.violation
}

// pickTop chooses the actor of the next top-level step; writers come
// up most often.
func (w *world) pickTop() *actor {
	weights := map[actorKind]int{kShard: 10, kDirect: 6, kCompactor: 3, kGC: 2, kReader: 3, kFencer: 1}
	total := 0
	for _, a := range w.actors {
		total += weights[a.kind]
	}
	n := w.intn(total)
	for _, a := range w.actors {
		if n -= weights[a.kind]; n < 0 {
			return a
		}
	}
	return w.actors[0]
}

// proc is one process of an actor: its view of the store, with its own
// faults.
type proc struct {
	a   *actor
	inc int
	occ map[string]uint64 // requests so far, by operation and key
}

// newBucket gives a the faulty view of the store of its next process.
func (w *world) newBucket(a *actor) {
	a.bucket = w.procBucket(a, a.inc)
}

func (w *world) procBucket(a *actor, inc int) *fault.Bucket {
	p := &proc{a: a, inc: inc, occ: map[string]uint64{}}
	return fault.Wrap(w.store, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		return w.inject(p, op, key)
	}))
}

// suspendable: requests an operation makes from its own goroutine, one at
// a time. Uploads run beside the encoder, and scans read two fragments at
// once, so requests for data objects are never suspension points: which of
// two concurrent reads came first is up to the Go scheduler.
func suspendable(op fault.Op, key string) bool {
	switch op {
	case fault.OpPutIfAbsent, fault.OpList, fault.OpDelete, fault.OpAttributes:
		return true
	case fault.OpGet:
		return !strings.HasSuffix(key, ".parquet")
	}
	return false
}

// inject decides the fate of one request.
//
// Suspensions happen only in the operation on top of the stack, at the
// request its start chose (the k-th suspendable one, or the first create
// of a manifest for a stall), and one at a time.
//
// Faults are not drawn in sequence from a generator: an upload runs in a
// goroutine of its own beside the reads of its operation, and scans read
// two fragments at once, so the order of requests within an operation is
// up to the Go scheduler. A fault is instead a hash of the seed, the
// process, the request and how many times this process made it before,
// with object names of random parts replaced by their order of creation.
func (w *world) inject(p *proc, op fault.Op, key string) fault.Fault {
	if w.final.Load() {
		return fault.Fault{}
	}
	a := p.a
	if w.isTop(a) {
		switch {
		case a.stallAt && op == fault.OpPutIfAbsent && strings.HasPrefix(key, "_versions/") && a.suspended.CompareAndSwap(false, true):
			w.suspend(a, op, key, true)
		case suspendable(op, key) && a.suspendAt > 0 && a.requests.Add(1) == a.suspendAt && a.suspended.CompareAndSwap(false, true):
			w.suspend(a, op, key, false)
		}
	}
	name := w.store.stableName(key)
	w.mu.Lock()
	defer w.mu.Unlock()
	id := string(op) + " " + name
	p.occ[id]++
	h := mix(w.cfg.Seed ^ mix(hashString(a.name)+uint64(p.inc)) ^ mix(hashString(id)) ^ mix(p.occ[id]))
	unit := func() float64 { h = mix(h); return float64(h>>11) / (1 << 53) }
	if unit() >= w.pFault {
		if a.kind != kGC && a.kind != kReader && a.kind != kFencer && unit() < w.pCrash {
			w.rep.Faults["crash"]++
			return fault.Fault{Action: fault.Crash}
		}
		return fault.Fault{}
	}
	var f fault.Fault
	isWrite := op == fault.OpPut || op == fault.OpPutIfAbsent || op == fault.OpDelete
	switch k := int(unit() * 6); {
	case k == 0:
		f = fault.Fault{Delay: time.Duration(unit()*300) * time.Microsecond}
		w.rep.Faults["latency"]++
		return f
	case k == 1 && isWrite:
		f.Action = fault.LoseResponse
	case k == 2 && op == fault.OpPutIfAbsent:
		f.Action = fault.FalseExists
	case k == 3 && op == fault.OpPutIfAbsent:
		f.Action = fault.Conflict
	default:
		f.Action = fault.Fail
	}
	w.rep.Faults[f.Action.String()]++
	return f
}

func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

func (w *world) isTop(a *actor) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.stack) > 0 && w.stack[len(w.stack)-1] == a
}

// suspend runs other actors' operations while a's request waits. A stall
// first moves the clock past GC's safety age and ends with a collection.
func (w *world) suspend(a *actor, op fault.Op, key string, stall bool) {
	w.depth.Add(1)
	defer w.depth.Add(-1)
	w.mu.Lock()
	if stall {
		w.rep.Stalls++
	} else {
		w.rep.Preemptions++
	}
	w.mu.Unlock()
	if stall {
		d := time.Duration(10+w.intn(120)) * time.Minute
		w.logf("%s stalls before %s %s; the clock moves %v", a.name, op, key, d)
		w.clock.Advance(d)
	} else {
		w.logf("%s suspended before %s %s", a.name, op, key)
	}
	for range 1 + w.intn(3) {
		var free []*actor
		for _, b := range w.actors {
			if !b.busy && b != a && (!stall || b.kind != kGC) {
				free = append(free, b)
			}
		}
		if len(free) == 0 {
			break
		}
		w.runOp(free[w.intn(len(free))])
	}
	if stall {
		for _, b := range w.actors {
			if b.kind == kGC && !b.busy {
				w.runOp(b)
			}
		}
	}
	w.logf("%s resumes", a.name)
}

func (w *world) now() int64 { return w.clockT.Add(1) }

// runOp runs one operation of a and records it.
func (w *world) runOp(a *actor) {
	if a.restart && (a.kind == kDirect || a.kind == kCompactor) {
		// A new process: a fresh view of the store, a new writer name.
		a.inc++
		w.newBucket(a)
		a.tbl, a.restart = nil, false
	}
	a.busy = true
	a.suspendAt, a.stallAt = 0, false
	a.requests.Store(0)
	a.suspended.Store(false)
	if w.depth.Load() < 2 {
		if w.chance(w.pPreempt) {
			a.suspendAt = int64(1 + w.intn(12))
		} else if a.kind != kGC && a.kind != kReader && a.kind != kFencer && w.chance(w.pStall) {
			a.stallAt = true
		}
	}
	w.mu.Lock()
	w.stack = append(w.stack, a)
	w.mu.Unlock()
	rec := opRecord{actor: a.name, writer: a.writer(), call: w.now()}
	kind, detail := w.do(a, &rec)
	rec.ret = w.now()
	w.mu.Lock()
	w.stack = w.stack[:len(w.stack)-1]
	w.mu.Unlock()
	a.busy = false
	if a.bucket.Crashed() {
		a.restart = true
		detail += " [process crashed]"
	}
	w.mu.Lock()
	w.rep.Ops[kind]++
	w.ops = append(w.ops, rec)
	w.mu.Unlock()
	w.logf("%s %s: %s", a.name, kind, detail)
}

func (w *world) do(a *actor, rec *opRecord) (string, string) {
	switch a.kind {
	case kShard:
		return w.shardOp(a, rec)
	case kDirect:
		return w.directOp(a, rec)
	case kCompactor:
		rec.commits, rec.conserves = true, true
		return w.compactOp(a)
	case kGC:
		rec.commits = true // a repair
		return w.gcOp(a)
	case kReader:
		return w.readerOp(a, rec)
	default:
		return w.fenceOp()
	}
}

func (w *world) commitOptions(a *actor) commit.Options {
	return commit.Options{Writer: a.writer(), Now: w.clock.Now, Budget: 20 * time.Second,
		BaseBackoff: 50 * time.Microsecond, MaxBackoff: time.Millisecond}
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

func (w *world) settle(ids []int64, err error, fenced bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		switch {
		case err == nil:
			w.acked[id] = true
			w.rep.RowsAcked++
		case fenced:
			w.forbidden[id] = true
		default:
			w.maybe[id] = true
		}
	}
}

// ulids are the random parts of object names; the trace leaves them out
// so that two runs of a seed print the same lines.
var ulids = regexp.MustCompile(`[0-9A-HJKMNP-TV-Z]{26}|-[0-9a-f]{12}\.parquet`)

func short(err error) string {
	if err == nil {
		return "ok"
	}
	s := ulids.ReplaceAllString(err.Error(), "…")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return "error: " + s
}

// --- shard writers ---

func (w *world) shardOptions(a *actor) walshard.Options {
	return walshard.Options{
		Shard:      a.name,
		GroupWait:  20 * time.Microsecond,
		FlushBytes: 1 << 40, MaxMemtableBytes: 1 << 40, MaxPendingGenerations: 1 << 20,
		MergeMaxGenerations: 1 + w.intn(4),
		Commit:              w.commitOptions(a),
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
	s, err := walshard.Open(w.ctx, a.bucket, w.shardOptions(a))
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
	if a.zombie != nil {
		// The fenced handle tries once more; nothing it writes may appear.
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
		w.settle(ids, err, errors.Is(err, walshard.ErrFenced))
		return "zombie-append", short(err)
	}
	if a.shard == nil || a.restart {
		err := w.reopen(a)
		rec.writer = a.writer()
		return "open", short(err)
	}
	s := a.shard
	switch n := w.intn(100); {
	case n < 55:
		ids := w.newRows()
		b := batch(ids)
		err := s.Append(w.ctx, b)
		b.Release()
		fenced := errors.Is(err, walshard.ErrFenced)
		w.settle(ids, err, fenced)
		if err == nil {
			w.mu.Lock()
			for _, id := range ids {
				w.shardRows[a.idx][id] = true
			}
			w.mu.Unlock()
		}
		if fenced && a.next == nil {
			a.restart = true
		}
		return "append", fmt.Sprintf("ids %d..%d: %s", ids[0], ids[len(ids)-1], short(err))
	case n < 70:
		g, err := s.Flush(w.ctx)
		if errors.Is(err, walshard.ErrFenced) && a.next == nil {
			a.restart = true
		}
		return "flush", fmt.Sprintf("gen %d: %s", g, short(err))
	case n < 85:
		rec.commits = true
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
	want := make([]int64, 0, len(w.shardRows[a.idx]))
	for id := range w.shardRows[a.idx] {
		want = append(want, id)
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
	return fmt.Sprintf("%d rows, each once", len(seen))
}

// checkRows checks a read: each id in want once, no id more than once, no
// forbidden id, no id nobody wrote.
func (w *world) checkRows(seen map[int64]int, want []int64, where string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rep.RowsChecked += int64(len(seen))
	for _, id := range slices.Sorted(maps.Keys(seen)) {
		n := seen[id]
		switch {
		case n > 1:
			return w.failLocked("exactly once", "%s: row %d appears %d times", where, id, n)
		case w.forbidden[id]:
			return w.failLocked("fencing", "%s: row %d, refused to a fenced writer, appears", where, id)
		case !w.inflight(id):
			return w.failLocked("no phantom rows", "%s: row %d was never written", where, id)
		}
	}
	for _, id := range want {
		if seen[id] == 0 {
			return w.failLocked("no lost rows", "%s: acknowledged row %d is missing", where, id)
		}
	}
	return ""
}

// inflight: an id handed out to an append (which may not have returned
// yet: a read nested inside it may see its rows).
func (w *world) inflight(id int64) bool {
	return id >= 1 && id <= w.nextID
}

func (w *world) failLocked(oracle, format string, args ...any) string {
	w.mu.Unlock()
	defer w.mu.Lock()
	return w.fail(oracle, format, args...).Error()
}

// --- direct appenders ---

func (w *world) directOp(a *actor, rec *opRecord) (string, string) {
	rec.commits = true
	if a.tbl == nil {
		o := w.commitOptions(a)
		t, err := commit.OpenTable(w.ctx, a.bucket, &o)
		if err != nil {
			return "open", short(err)
		}
		a.tbl = t
	}
	ids := w.newRows()
	b := batch(ids)
	res, err := a.tbl.Append(w.ctx, b)
	b.Release()
	w.settle(ids, err, false)
	return "append", fmt.Sprintf("ids %d..%d at v%d: %s", ids[0], ids[len(ids)-1], res.Version, short(err))
}

// --- compactors and GC ---

func (w *world) compactOp(a *actor) (string, string) {
	p := compactor.Policy{MinFragments: 2 + w.intn(4), TargetRows: int64(40 + w.intn(200))}
	o := compactor.Options{Commit: w.commitOptions(a), Parallelism: 1}
	res, err := compactor.Compact(w.ctx, a.bucket, p, &o)
	if errors.Is(err, compactor.ErrRowsChanged) {
		return "compact", w.fail("compaction conserves rows", "%v", err).Error()
	}
	return "compact", fmt.Sprintf("%d -> %d fragments at v%d: %s", res.FragmentsBefore, res.FragmentsAfter, res.Version, short(err))
}

func (w *world) gcPolicy(a *actor) compactor.GCPolicy {
	return compactor.GCPolicy{KeepVersions: 1 + w.intn(3), RetainFor: compactor.MinRetain, SafetyAge: compactor.MinRetain,
		Commit: w.commitOptions(a)}
}

func (w *world) gcOp(a *actor) (string, string) {
	if d := []time.Duration{0, time.Minute, 6 * time.Minute}[w.intn(3)]; d > 0 {
		w.clock.Advance(d)
	}
	res, err := compactor.GC(w.ctx, a.bucket, w.gcPolicy(a), w.clock.Now())
	var gens []string
	for _, k := range res.ObjectsDeleted {
		if strings.Contains(k, "/gen/") {
			gens = append(gens, strings.TrimPrefix(k, "_shards/"))
		}
	}
	repaired := ""
	if len(res.Repaired) > 0 {
		repaired = fmt.Sprintf(", repaired %v", res.Repaired)
	}
	return "gc", fmt.Sprintf("boundary v%d, %d versions and %d objects deleted (generations %v)%s: %s", res.Boundary, len(res.VersionsDeleted), len(res.ObjectsDeleted), gens, repaired, short(err))
}

// --- readers ---

func (w *world) readerOp(a *actor, rec *opRecord) (string, string) {
	switch n := w.intn(10); {
	case n < 5:
		s, err := table.Open(w.ctx, a.bucket, nil)
		if err != nil {
			return "read", short(err)
		}
		seen, d, err := scanSnapshot(w.ctx, s)
		var v *Violation
		if errors.As(err, &v) {
			return "read", w.fail(v.Oracle, "%s at v%d", v.Detail, s.Version()).Error()
		}
		if err != nil {
			return "read", fmt.Sprintf("v%d: %s", s.Version(), short(err))
		}
		if msg := w.checkRows(seen, nil, fmt.Sprintf("read of v%d", s.Version())); msg != "" {
			return "read", msg
		}
		rec.read = &d
		return "read", fmt.Sprintf("v%d: %v", s.Version(), d)
	case n < 7:
		s, err := table.Open(w.ctx, a.bucket, nil)
		if err != nil {
			return "pin", short(err)
		}
		_, d, err := scanSnapshot(w.ctx, s)
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
		if errors.Is(err, table.ErrVersionNotFound) && !p.tagged {
			continue // collected: the pin is released
		}
		if err != nil {
			if errors.Is(err, table.ErrVersionNotFound) {
				return w.fail("pinned versions", "tagged version v%d is gone", p.version).Error()
			}
			kept = append(kept, p)
			continue
		}
		_, d, err := scanSnapshot(w.ctx, s)
		if errors.Is(err, blob.ErrNotFound) {
			if _, merr := w.store.Get(w.ctx, table.ManifestKey(p.version)); merr == nil || p.tagged {
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

// --- the fencer ---

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
	s, err := walshard.Open(w.ctx, bucket, o)
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

// --- oracles ---

// manifestCreated records a manifest as it lands: who made it and what it
// did to the table's rows. Fragments are read once, when first added.
func (w *world) manifestCreated(key string, data []byte, again bool) {
	at := w.now()
	m, err := table.DecodeManifest(key, data)
	if err != nil {
		w.fail("manifests", "%s does not decode: %v", key, err)
		return
	}
	ev := manifestEvent{at: at, version: m.Version, writer: m.Transaction.Writer, kind: m.Transaction.Kind, again: again}
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
	for _, f := range m.Transaction.Added {
		ev.added = append(ev.added, f.Key)
		w.emu.Lock()
		d, known := w.fragRows[f.ID]
		w.emu.Unlock()
		if !known {
			_, d, err = scanSnapshot(w.ctx, table.SnapshotOf(w.store, schema, []table.Fragment{f}))
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
	w.emu.Lock()
	for _, id := range m.Transaction.Removed {
		ev.delta = ev.delta.sub(w.fragRows[id])
		ev.lost = ev.lost || w.fragLost[id]
	}
	w.events = append(w.events, ev)
	w.emu.Unlock()
	w.logf("manifest v%d: %s by %s adds %d fragments, removes %v; rows %+d (lost %v, created again %v)",
		ev.version, ev.kind, ev.writer, len(ev.added), m.Transaction.Removed, ev.delta.N, ev.lost, ev.again)
}

// checkQuiet runs between top-level steps, when no operation is running.
func (w *world) checkQuiet() error {
	if err := w.store.manifestTrouble(); err != nil {
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
		rec := opRecord{actor: a.name, writer: a.writer(), commits: true, call: w.now()}
		err := w.drain(a.shard)
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
	w.logf("final: collection, compaction and collection")
	c := &actor{name: "compactor-final", kind: kCompactor}
	w.newBucket(c)
	rec := opRecord{actor: c.name, writer: c.writer(), commits: true, call: w.now()}
	o := compactor.Options{Commit: w.commitOptions(c), Parallelism: 1}
	if _, err := compactor.GC(w.ctx, c.bucket, compactor.GCPolicy{KeepVersions: 1000, Commit: o.Commit}, w.clock.Now()); err != nil {
		return w.fail("recovery", "first final collection: %v", err)
	}
	if _, err := compactor.Compact(w.ctx, c.bucket, compactor.Policy{MinFragments: 2}, &o); err != nil {
		m, _ := table.ReadLatest(w.ctx, w.store)
		return w.fail("recovery", "final compaction: %v%s", err, w.provenance(m))
	}
	rec.ret = w.now()
	w.ops = append(w.ops, rec)
	if err := w.checkQuiet(); err != nil {
		return err
	}
	w.clock.Advance(3 * time.Hour)
	if _, err := compactor.GC(w.ctx, w.store, compactor.GCPolicy{KeepVersions: 1}, w.clock.Now()); err != nil {
		return w.fail("recovery", "final collection: %v", err)
	}
	s, err := table.Open(w.ctx, w.store, nil)
	if err != nil {
		return w.fail("recovery", "final open: %v", err)
	}
	seen, _, err := scanSnapshot(w.ctx, s)
	if err != nil {
		return w.fail("no lost rows", "the final table does not read: %v%s", err, w.provenance(s.Manifest()))
	}
	want := make([]int64, 0, len(w.acked))
	for id := range w.acked {
		want = append(want, id)
	}
	slices.Sort(want)
	if msg := w.checkRows(seen, want, fmt.Sprintf("final table v%d", s.Version())); msg != "" {
		return w.violation
	}
	w.logf("final: v%d holds %d rows: the %d acknowledged, each once, and %d of %d whose append failed",
		s.Version(), len(seen), len(w.acked), len(seen)-len(w.acked), len(w.maybe))
	for _, p := range w.allPins() {
		if p.tagged {
			s, err := table.Open(w.ctx, w.store, &table.OpenOptions{Version: p.version})
			if err != nil {
				return w.fail("pinned versions", "tagged v%d after the final collection: %v", p.version, err)
			}
			if _, d, err := scanSnapshot(w.ctx, s); err != nil || d != p.rows {
				return w.fail("pinned versions", "tagged v%d after the final collection: %v, %v (pinned %v)", p.version, d, err, p.rows)
			}
		}
	}
	return w.checkLinearizable()
}

// drain flushes s and merges until nothing awaits merging, as Drain
// does, but gives up after a bounded number of passes: a merge that never
// moves the watermark would loop for ever.
func (w *world) drain(s *walshard.Shard) error {
	if _, err := s.Flush(w.ctx); err != nil {
		return err
	}
	for range 100 {
		res, err := s.Merge(w.ctx)
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
					// A compaction's Rewrite keeps the rows as they are,
					// but one whose outputs garbage collection took while
					// it stalled (and the undoing of it, by itself or by a
					// repair) changes them.
					if op.conserves && ev.kind == table.KindRewrite && !ev.lost && ev.delta != (digest{}) {
						return w.fail("compaction conserves rows", "%s's rewrite at v%d changed the table's rows by %v", op.actor, ev.version, ev.delta)
					}
				}
			}
			if n > 0 {
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
func (w *world) provenance(m *table.Manifest) string {
	if m == nil {
		return ""
	}
	var b strings.Builder
	for _, f := range m.Fragments {
		if _, err := w.store.Attributes(w.ctx, f.Key); err == nil {
			continue
		}
		fmt.Fprintf(&b, "; fragment %d (%s) is gone", f.ID, ulids.ReplaceAllString(f.Key, "…"))
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
