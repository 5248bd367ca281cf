package sim

// The faults a simulated process meets: each request of an actor's
// process passes, is delayed, fails, loses its response, crashes the
// process, or is suspended while other actors run, as the seed decides.

import (
	"strings"
	"time"

	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/table/format"
)

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
	a.db = nil
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
// two concurrent reads came first is up to the Go scheduler. A WAL entry
// can be a fragment too (walshard.Options.ReuseBytes).
func suspendable(op fault.Op, key string) bool {
	switch op {
	case fault.OpPutIfAbsent, fault.OpList, fault.OpDelete, fault.OpAttributes:
		return true
	case fault.OpGet:
		_, _, fragment := format.ParseGenerationKey(key)
		return !strings.HasSuffix(key, ".parquet") && !fragment && !strings.HasPrefix(key, format.DeletionsDir)
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
		// A process dies at a request it makes in order: not at a read
		// of a data object, which a scan may make ahead of time, beside
		// the operation's other requests, so that which of them meets the
		// crash first would be the scheduler's choice.
		if a.kind != kGC && a.kind != kReader && a.kind != kFencer && unit() < w.pCrash && (op != fault.OpGet || suspendable(op, key)) {
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

// nesting is the number of operations in progress.
func (w *world) nesting() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.stack)
}

func (w *world) isTop(a *actor) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.stack) > 0 && w.stack[len(w.stack)-1] == a
}

// suspend runs other actors' operations while a's request waits. A stall
// first moves the clock past GC's safety age and ends with a collection.
func (w *world) suspend(a *actor, op fault.Op, key string, stall bool) {
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
