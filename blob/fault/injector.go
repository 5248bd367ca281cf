package fault

import (
	"bytes"
	"io"
	"math/rand/v2"
	"regexp"
	"slices"
	"sync/atomic"
	"time"
)

// Injector decides the fault for one request. It is called concurrently.
type Injector interface {
	Inject(op Op, key string) Fault
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op, key string) Fault

// Inject calls fn.
func (fn InjectorFunc) Inject(op Op, key string) Fault { return fn(op, key) }

// Never injects nothing.
func Never() Injector { return InjectorFunc(func(Op, string) Fault { return Fault{} }) }

// Always injects f into every request.
func Always(f Fault) Injector { return InjectorFunc(func(Op, string) Fault { return f }) }

// OnOps applies inj to the given operations only.
func OnOps(inj Injector, ops ...Op) Injector {
	return InjectorFunc(func(op Op, key string) Fault {
		if !slices.Contains(ops, op) {
			return Fault{}
		}
		return inj.Inject(op, key)
	})
}

// OnKeys applies inj to keys (or list prefixes) that match re only.
func OnKeys(re *regexp.Regexp, inj Injector) Injector {
	return InjectorFunc(func(op Op, key string) Fault {
		if !re.MatchString(key) {
			return Fault{}
		}
		return inj.Inject(op, key)
	})
}

// WithProbability applies inj to each request with probability p, drawn
// from a generator seeded with seed: the same seed and the same sequence
// of requests give the same faults.
func WithProbability(seed uint64, p float64, inj Injector) Injector {
	r := &mutexRand{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	return InjectorFunc(func(op Op, key string) Fault {
		if r.Float64() >= p {
			return Fault{}
		}
		return inj.Inject(op, key)
	})
}

// Nth applies inj to the nth request it sees (1-based), once.
func Nth(n int64, inj Injector) Injector {
	var seen atomic.Int64
	return InjectorFunc(func(op Op, key string) Fault {
		if seen.Add(1) != n {
			return Fault{}
		}
		return inj.Inject(op, key)
	})
}

// AfterN applies inj to every request after the first n it sees.
func AfterN(n int64, inj Injector) Injector {
	var seen atomic.Int64
	return InjectorFunc(func(op Op, key string) Fault {
		if seen.Add(1) <= n {
			return Fault{}
		}
		return inj.Inject(op, key)
	})
}

// CrashAfter lets n requests through, then crashes.
func CrashAfter(n int64) Injector { return AfterN(n, Always(Fault{Action: Crash})) }

// Any asks each injector in turn and returns the first fault with an
// action; delays of the injectors asked are added up.
func Any(injs ...Injector) Injector {
	return InjectorFunc(func(op Op, key string) Fault {
		var delay time.Duration
		for _, inj := range injs {
			f := inj.Inject(op, key)
			delay += f.Delay
			if f.Action != None {
				f.Delay = delay
				return f
			}
		}
		return Fault{Delay: delay}
	})
}

// Latency delays every request by a duration drawn uniformly from
// [min, max) with a generator seeded with seed.
func Latency(seed uint64, min, max time.Duration) Injector {
	r := &mutexRand{r: rand.New(rand.NewPCG(seed, seed+1))}
	return InjectorFunc(func(Op, string) Fault {
		return Fault{Delay: min + time.Duration(r.Float64()*float64(max-min))}
	})
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
