package format

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"
)

type item[T any] struct {
	v   T
	err error
}

// Reservation is what inOrder's reserve took for one item: produced is
// called when the item's producer returns, used once everything it
// emitted has been used or released — or, for an item never produced,
// both as soon as it is given up. Either may be nil.
type Reservation struct {
	produced, Used func()
}

func (r Reservation) afterProduce() {
	if r.produced != nil {
		r.produced()
	}
}

func (r Reservation) afterUse() {
	if r.Used != nil {
		r.Used()
	}
}

// queued is an item's output on its way to use, and its reservation.
type queued[T any] struct {
	ch  chan item[T]
	res Reservation
}

// ReadInOrder reads frags with read, up to parallelism at once and at most
// readAhead bytes of fragment objects at once (a larger one alone), and
// hands what they emit to use, in fragment order; use takes ownership and
// returns false to stop the reads. What is read but not used goes to
// release. It returns the first read's error, or the context's when it
// ended first.
func ReadInOrder[T any](ctx context.Context, frags []*Fragment, parallelism int, readAhead int64,
	read func(context.Context, *Fragment, func(T) bool) error, use func(T) bool, release func(T)) error {
	return InOrder(ctx, len(frags), parallelism,
		Weighed(readAhead, func(i int) int64 { return min(max(frags[i].Bytes, 1), readAhead) }),
		func(ctx context.Context, i int, emit func(T) bool) error { return read(ctx, frags[i], emit) },
		use, release)
}

// Weighed reserves for each item its weight from a budget of its own
// (a heavier item alone), until the item's producer returns.
func Weighed(budget int64, weight func(int) int64) func(context.Context, int) (Reservation, error) {
	sem := semaphore.NewWeighted(budget)
	return func(ctx context.Context, i int) (Reservation, error) {
		w := min(weight(i), budget)
		if err := sem.Acquire(ctx, w); err != nil {
			return Reservation{}, err
		}
		return Reservation{produced: func() { sem.Release(w) }}, nil
	}
}

// InOrder runs produce for items 0..n-1, up to parallelism at once, each
// once reserve has taken what it will hold (in item order, before its
// producer starts), and hands what they emit to use in item order (see
// readInOrder). A reserve that fails fails the run at that item's turn,
// after the items before it were used.
//
// Reservations are taken in item order and no producer waits for one:
// so an item's reservation, once taken, comes back without any further
// reservation of this run being taken first — its producer runs to its
// end as soon as use has taken the items before it, which all hold theirs
// already. A run waiting in reserve holds only such reservations.
func InOrder[T any](parent context.Context, n, parallelism int, reserve func(context.Context, int) (Reservation, error),
	produce func(context.Context, int, func(T) bool) error, use func(T) bool, release func(T)) error {
	ctx, cancel := context.WithCancel(parent)
	r := &orderedRun[T]{ctx: ctx, cancel: cancel, queue: make(chan queued[T], parallelism),
		slots: make(chan struct{}, parallelism), reserve: reserve, produce: produce, release: release}
	defer func() {
		cancel()
		r.wg.Wait()
	}()
	r.wg.Go(func() { r.feed(n) })
	err, stopped := r.consume(use)
	if !stopped && parent.Err() != nil {
		return parent.Err()
	}
	return err
}

// orderedRun is one inOrder run: the producers it starts, and their
// outputs queued in item order.
type orderedRun[T any] struct {
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	queue   chan queued[T]
	slots   chan struct{} // at most parallelism items produced at once
	reserve func(context.Context, int) (Reservation, error)
	produce func(context.Context, int, func(T) bool) error
	release func(T)
}

// feed starts the producers of items 0..n-1 in order: each takes a slot,
// then its reservation, and gives the slot back when it is done.
func (r *orderedRun[T]) feed(n int) {
	defer close(r.queue)
	for i := range n {
		select {
		case r.slots <- struct{}{}:
		case <-r.ctx.Done():
			return
		}
		// A producer that failed cancels before it gives its slot back:
		// none starts after a failure, so the requests a scan makes do
		// not depend on the scheduler.
		if r.ctx.Err() != nil {
			<-r.slots
			return
		}
		res, err := r.reserve(r.ctx, i)
		if err != nil {
			<-r.slots
			if r.ctx.Err() == nil {
				failed := make(chan item[T], 1)
				failed <- item[T]{err: err}
				close(failed)
				r.queue <- queued[T]{ch: failed}
			}
			return
		}
		ch := make(chan item[T], 2)
		select {
		case r.queue <- queued[T]{ch: ch, res: res}:
		case <-r.ctx.Done():
			<-r.slots
			res.afterProduce()
			res.afterUse()
			return
		}
		r.wg.Go(func() { r.run(i, ch, res) })
	}
}

// run produces item i into ch.
func (r *orderedRun[T]) run(i int, ch chan item[T], res Reservation) {
	defer func() { <-r.slots; res.afterProduce() }()
	defer close(ch)
	err := r.produce(r.ctx, i, func(v T) bool {
		select {
		case ch <- item[T]{v: v}:
			return true
		case <-r.ctx.Done():
			r.release(v)
			return false
		}
	})
	if err != nil && r.ctx.Err() == nil {
		ch <- item[T]{err: err}
		r.cancel()
	}
}

// consume hands the outputs to use in item order, and returns the first
// error and whether the run stopped early.
func (r *orderedRun[T]) consume(use func(T) bool) (err error, stopped bool) {
	// A use that panics (a server cutting an answer short) leaves no
	// reservation taken and nothing emitted unreleased: the rest of the
	// run is given back as a stopped run's would be.
	var cur *queued[T]
	defer func() {
		if p := recover(); p != nil {
			r.cancel()
			if cur != nil {
				drainQueued(*cur, r.release)
			}
			for q := range r.queue {
				drainQueued(q, r.release)
			}
			panic(p)
		}
	}()
	for q := range r.queue {
		cur = &q
		for it := range q.ch {
			switch {
			case stopped:
				if it.err == nil {
					r.release(it.v)
				}
			case it.err != nil:
				err, stopped = it.err, true
				r.cancel()
			case !use(it.v):
				stopped = true
				r.cancel()
			}
		}
		cur = nil
		q.res.afterUse()
	}
	return err, stopped
}

// drainQueued releases what is left of an item's output, then its
// reservation.
func drainQueued[T any](q queued[T], release func(T)) {
	for it := range q.ch {
		if it.err == nil {
			release(it.v)
		}
	}
	q.res.afterUse()
}
