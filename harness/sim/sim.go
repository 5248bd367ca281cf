// Package sim runs seeded simulations of many actors working on one table
// while the object store misbehaves, and checks that nothing acknowledged
// is ever lost or doubled.
//
// One seed decides everything: how many shard writers, direct appenders,
// compactors, deleters, followers and upserters there are, which operation runs next, which
// requests fail and how, and where one actor's operation is suspended while
// others run.
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
//     shard, in a fresh read of the whole fleet (walshard.ScanFleet: each
//     shard's WAL, generations and the table; left out when listings
//     lag) and, after a final drain, compaction and GC, in the base table;
//     rows whose append failed appear at most once; rows a fenced writer
//     was refused never appear; a named append (actors that name theirs
//     send one whose outcome they missed again, across crashes, until it
//     is acknowledged) is stored once — or at most twice when sent again
//     past the window its name is remembered for (format.IdempotencyWindow:
//     the clock moves hours on with a stall); a shard writer that names
//     its appends may lose an acknowledged answer, as a client of a
//     server's replicas does, and sends the append again, as often as not
//     through another shard writer's shard (another replica): the merges
//     store it once, or once more for each copy merged more than the
//     window after the latest commit that met its name, and no merge
//     installs a name the table must still remember (names.go); no row
//     appears that nobody wrote, and every
//     row reads back with its value and its blob (up to 1 KiB) intact;
//   - a pinned version's rows never change while it is retained, and a
//     tagged version stays readable;
//   - no manifest is overwritten, and no deleted version comes back;
//   - a compaction's Rewrite conserves the rows (count and hashes);
//   - a row a Delete removed never appears in a version at or after the
//     delete's (deleters remove ranges of ids while the others work), and
//     a take by key answers exactly the rows a scan of the same version
//     holds under those keys;
//   - the history of commits and reads of the latest version is
//     linearizable (porcupine) against a sequential table whose state is
//     the multiset of its rows (left out when listings lag: reading the
//     latest version through a lagging listing is stale by design);
//   - a follower (changes.Changes from its checkpoint, or changes.Follow as a
//     named consumer) gets each version's changes once, in version order,
//     none from a compaction, and the replica they build equals a fresh
//     read of every version it reads through; garbage collection takes
//     nothing a recorded consumer has not read, short of the consumer
//     retention; with faults off, every follower reaches the latest
//     version;
//   - a schema change races appends (alter.go): a value an acknowledged
//     append wrote in an added column reads back wherever the column is,
//     and no append begun after a column's drop answered is acknowledged
//     with a value in it (a drop outwaits the shards' schema leases on the
//     simulation's clock);
//   - upserters upsert keys of their own (a few hot) and update ranges of
//     them: no read ever sees a key twice, and at the end each key's row
//     holds its last acknowledged write's value (or that of a write whose
//     outcome its writer never learned);
//   - every seed finishes (Campaign reports one that hangs).
package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
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
	kFleet
	kDeleter
	kFollower
	kUpserter
	kAlterer
	kGroupMember
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
	db     *engine.DB // the engine handle of the process's bucket (db)
	pins   []pin
	// keyed: the actor names its appends (producer: its name, the same in
	// every incarnation; one append at a time, numbered by seq) and sends
	// one whose outcome it did not learn again, under its name, until it
	// is acknowledged: retry holds it meanwhile.
	keyed bool
	seq   uint64
	retry *pendingAppend

	follow *follower // a follower's durable state
	began  time.Time // when the current operation began, on the clock
}

// pendingAppend is a named append whose outcome its actor does not know.
type pendingAppend struct {
	ids []int64
	seq uint64
	at  time.Time // the first attempt, on the simulation's clock
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
	// steps: its commits are steps of their own, each visible when it
	// lands (a merge makes one per pass: appends, then each generation
	// of upserts).
	steps bool
}

// manifestEvent is one manifest created in the store.
type manifestEvent struct {
	at      int64
	version uint64
	writer  string
	kind    format.Kind
	undoes  uint64 // the version it takes back
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
	fleets, deleters, followers int
	members                     int         // consumer group members
	group                       *groupState // their group's sink
	upserters                   int
	alterers                    int
	pFault, pCrash, pPreempt    float64
	pStall                      float64
	listLag                     bool

	mu     sync.Mutex // guards rng, rep counters, trace
	rng    *rand.Rand
	pauses *rand.Rand // long pauses of the whole fleet (gcOp)
	rep    Report
	trace  []string
	actors []*actor
	stack  []*actor // operations in progress, innermost last
	final  atomic.Bool
	clockT atomic.Int64 // logical time of calls, returns and manifests

	nextID int64
	acked  map[int64]bool
	maybe  map[int64]bool
	// twice: rows of named appends sent again past the window their name
	// is remembered for, which may appear twice.
	twice map[int64]bool
	// resentAt: rows of named appends sent again through another shard,
	// by the name's time.
	resentAt map[int64]time.Time
	// sentVia: by row of a named append, the shards it was sent through.
	sentVia   map[int64]map[string]bool
	forbidden map[int64]bool
	// deletedAt: rows a committed Delete removed, and the version that
	// removed them (read from the manifests as they land).
	deletedAt map[int64]uint64
	// Deletes acknowledged, and deletes undone (compactor.Repair takes
	// back a delete whose deletion vectors garbage collection took while
	// it stalled; it was never acknowledged, and its rows come back), by
	// the version they made.
	deletesAcked  map[uint64]bool
	deletesUndone map[uint64]uint64 // -> the version that undid it
	shardRows     []map[int64]bool  // rows acknowledged by each shard actor
	directRows    []int64           // rows acknowledged by direct appenders

	ops      []opRecord
	emu      sync.Mutex
	events   []manifestEvent
	fragRows map[uint64]digest // fragment id -> its rows
	fragLost map[uint64]bool
	// keyWrites: each upserter key's writes; nextVal numbers them.
	keyWrites map[int64][]keyWrite
	nextVal   int64
	// shardUpserts: shard actors upsert keys too (drawn from side);
	// installedAt: the version whose merge installed each value a shard
	// upserted, by key and value (read from the manifests as they land).
	shardUpserts bool
	// replicas: named shard appends lose answers and are sent again
	// through another shard writer's shard, as to another replica.
	replicas    bool
	side        *rand.Rand
	installedAt map[[2]int64]uint64
	nextExtra   int // the added columns' numbers (alter.go)
	// extras: the added columns (by stored name) an acknowledged append
	// wrote a value in, by row; droppedAt: when the drop of an added
	// column answered, by stored name, in logical time (alter.go).
	extras    map[int64][]string
	droppedAt map[string]int64
	// bornDropped: by fragment, how many copies of each row its deletion
	// vector dropped when it was added (a merge's copies of named appends
	// stored elsewhere too); a row's other copies there were live.
	bornDropped map[uint64]map[int64]int
	landed      map[uint64]time.Time // version -> when it landed, on the clock
	nameEvents  []nameEvent          // what versions did to names (names.go)
	violation   error
	tags        int
}

func newWorld(ctx context.Context, cfg Config) *world {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5157))
	w := &world{ctx: ctx, cfg: cfg, clock: &Clock{}, rng: rng,
		acked: map[int64]bool{}, maybe: map[int64]bool{}, twice: map[int64]bool{}, resentAt: map[int64]time.Time{}, sentVia: map[int64]map[string]bool{}, forbidden: map[int64]bool{}, deletedAt: map[int64]uint64{},
		deletesAcked: map[uint64]bool{}, deletesUndone: map[uint64]uint64{},
		fragRows: map[uint64]digest{}, fragLost: map[uint64]bool{}, landed: map[uint64]time.Time{}, keyWrites: map[int64][]keyWrite{}, installedAt: map[[2]int64]uint64{},
		extras: map[int64][]string{}, droppedAt: map[string]int64{}, bornDropped: map[uint64]map[int64]int{}}
	w.shards = 1 + rng.IntN(3)
	w.directs = rng.IntN(3)
	w.compactors = 1 + rng.IntN(2)
	w.pFault = []float64{0, 0.02, 0.05}[rng.IntN(3)]
	w.pCrash = []float64{0, 0.003}[rng.IntN(2)]
	w.pPreempt = []float64{0.15, 0.35}[rng.IntN(2)]
	w.pStall = []float64{0, 0.05, 0.15}[rng.IntN(3)]
	w.listLag = rng.IntN(4) == 0
	w.fleets = rng.IntN(2)
	w.deleters = rng.IntN(2)
	w.store = NewStore(w.clock, w.listLag, cfg.Seed)
	w.store.onCreate = w.manifestCreated
	w.rep = Report{Seed: cfg.Seed, Ops: map[string]int{}, Faults: map[string]int{}}
	w.rep.Setup = fmt.Sprintf("%d shards, %d direct appenders, %d compactors, %d fleet mergers and adopters, %d deleters; faults p=%.2f, crashes p=%.3f; suspended operations p=%.2f, stalled commits p=%.2f; listings lag: %v",
		w.shards, w.directs, w.compactors, w.fleets, w.deleters, w.pFault, w.pCrash, w.pPreempt, w.pStall, w.listLag)
	keyed := 0
	add := func(kind actorKind, name string, n int) {
		for i := range n {
			a := &actor{name: fmt.Sprintf("%s-%d", name, i), kind: kind, idx: i}
			if kind == kShard || kind == kDirect {
				a.keyed = rng.IntN(2) == 0
				keyed += map[bool]int{true: 1}[a.keyed]
			}
			w.actors = append(w.actors, a)
		}
	}
	add(kShard, "shard", w.shards)
	add(kDirect, "direct", w.directs)
	add(kCompactor, "compactor", w.compactors)
	add(kGC, "gc", 1)
	add(kReader, "reader", 2)
	add(kFencer, "fencer", 1)
	add(kFleet, "fleet", w.fleets)
	add(kDeleter, "deleter", w.deleters)
	w.followers = rng.IntN(3)
	add(kFollower, "follower", w.followers)
	w.upserters = rng.IntN(3)
	add(kUpserter, "upserter", w.upserters)
	w.alterers = rng.IntN(2)
	add(kAlterer, "alterer", w.alterers)
	w.members, w.group = int(mix(cfg.Seed^0x9c0d)%4), newGroupState() // group members: a stream of their own too
	add(kGroupMember, "member", w.members)
	// Shard upserts draw from a stream of their own, so that seeds that
	// found defects before they existed run as they did.
	w.shardUpserts = w.upserters > 0 && mix(cfg.Seed^0x613e)%2 == 0
	// So do the lost answers of named appends and their retries through
	// another shard (replicas), in half the seeds with two shards or more.
	w.replicas = w.shards > 1 && mix(cfg.Seed^0x7e91)%2 == 0
	w.side = rand.New(rand.NewPCG(cfg.Seed, 0x5a3d))
	w.pauses = rand.New(rand.NewPCG(cfg.Seed, 0x12e7))
	for _, a := range w.actors {
		if a.kind == kFollower {
			a.follow = &follower{rows: map[int64]int{}}
		}
	}
	w.rep.Setup += fmt.Sprintf("; %d appenders name their appends and retry them; %d followers; %d upserters; %d schema changers; shards upsert: %v; replicas: %v; %d group members", keyed, w.followers, w.upserters, w.alterers, w.shardUpserts, w.replicas, w.members)
	w.shardRows = make([]map[int64]bool, w.shards)
	for i := range w.shardRows {
		w.shardRows[i] = map[int64]bool{}
	}
	return w
}

// logf adds a trace line, indented by the operations in progress.
func (w *world) logf(format string, args ...any) {
	line := randomPart.ReplaceAllString(fmt.Sprintf(format, args...), "…")
	w.mu.Lock()
	line = strings.Repeat("  ", len(w.stack)) + line
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
	if w.members > 0 {
		if err := w.startGroup(); err != nil {
			return err
		}
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
	weights := map[actorKind]int{kShard: 10, kDirect: 6, kCompactor: 3, kGC: 2, kReader: 3, kFencer: 1, kFleet: 3, kDeleter: 2, kFollower: 2, kUpserter: 4, kAlterer: 1, kGroupMember: 2}
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

func (w *world) now() int64 { return w.clockT.Add(1) }

// runOp runs one operation of a and records it.
func (w *world) runOp(a *actor) {
	if a.restart && (a.kind == kDirect || a.kind == kCompactor || a.kind == kDeleter || a.kind == kFollower || a.kind == kUpserter || a.kind == kAlterer || a.kind == kGroupMember) {
		// A new process: a fresh view of the store, a new writer name.
		a.inc++
		w.newBucket(a)
		a.tbl, a.restart = nil, false
	}
	a.busy = true
	a.suspendAt, a.stallAt = 0, false
	a.requests.Store(0)
	a.suspended.Store(false)
	// Operations nest two deep at most: one suspended at the top, one
	// suspended inside the operations that run meanwhile.
	if w.nesting() < 2 {
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
	a.began = w.clock.Now()
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
	case kFleet:
		rec.commits, rec.steps = true, true
		return w.fleetOp(a)
	case kDeleter:
		rec.commits = true
		return w.deleteOp(a)
	case kFollower:
		return w.followOp(a)
	case kUpserter:
		rec.commits = true
		return w.upsertOp(a)
	case kAlterer:
		rec.commits, rec.conserves = true, true
		return w.alterOp(a)
	case kGroupMember:
		return w.groupOp(a)
	default:
		return w.fenceOp()
	}
}

func (w *world) commitOptions(a *actor) commit.Options {
	// A drop outwaits the shards' schema leases on the simulation's
	// clock: the clock moves on, and a shard's next write checks its
	// schema.
	return commit.Options{Writer: a.writer(), Now: w.clock.Now, Budget: 20 * time.Second,
		BaseBackoff: 50 * time.Microsecond, MaxBackoff: time.Millisecond, ReadParallelism: 1,
		Sleep: func(_ context.Context, d time.Duration) error { w.clock.Advance(d); return nil }}
}

func short(err error) string {
	if err == nil {
		return "ok"
	}
	s := randomPart.ReplaceAllString(err.Error(), "…")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return "error: " + s
}

// db is a's engine handle on the table through its current bucket (a
// process's), opened on first use.
func (w *world) db(a *actor) *engine.DB {
	if a.db == nil {
		a.db = w.openDB(a, a.bucket, w.shardOptions(a))
	}
	return a.db
}

// openDB opens an engine handle through b for actor a, with shard options
// so (its shard opened on first use) and the simulation's clock; its
// events log nothing.
func (w *world) openDB(a *actor, b *fault.Bucket, so walshard.Options) *engine.DB {
	db, _ := engine.OpenNew(b, &engine.Options{Name: "sim", Writer: so.Commit.Writer, Shard: so, Commit: so.Commit,
		Fleet: fleetmerge.Options{Parallelism: 1, Commit: w.commitOptions(a)},
		Now:   w.clock.Now, Log: slog.New(slog.DiscardHandler)})
	return db
}
