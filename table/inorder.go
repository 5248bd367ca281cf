package table

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"
)

type item[T any] struct {
	v   T
	err error
}

// reservation is what inOrder's reserve took for one item: produced is
// called when the item's producer returns, used once everything it
// emitted has been used or released — or, for an item never produced,
// both as soon as it is given up. Either may be nil.
type reservation struct {
	produced, used func()
}

func (r reservation) afterProduce() {
	if r.produced != nil {
		r.produced()
	}
}

func (r reservation) afterUse() {
	if r.used != nil {
		r.used()
	}
}

// queued is an item's output on its way to use, and its reservation.
type queued[T any] struct {
	ch  chan item[T]
	res reservation
}

// readInOrder reads frags with read, up to parallelism at once and at most
// readAhead bytes of fragment objects at once (a larger one alone), and
// hands what they emit to use, in fragment order; use takes ownership and
// returns false to stop the reads. What is read but not used goes to
// release. It returns the first read's error, or the context's when it
// ended first.
func readInOrder[T any](ctx context.Context, frags []*Fragment, parallelism int, readAhead int64,
	read func(context.Context, *Fragment, func(T) bool) error, use func(T) bool, release func(T)) error {
	return inOrder(ctx, len(frags), parallelism,
		weighed(readAhead, func(i int) int64 { return min(max(frags[i].Bytes, 1), readAhead) }),
		func(ctx context.Context, i int, emit func(T) bool) error { return read(ctx, frags[i], emit) },
		use, release)
}

// weighed reserves for each item its weight from a budget of its own
// (a heavier item alone), until the item's producer returns.
func weighed(budget int64, weight func(int) int64) func(context.Context, int) (reservation, error) {
	sem := semaphore.NewWeighted(budget)
	return func(ctx context.Context, i int) (reservation, error) {
		w := min(weight(i), budget)
		if err := sem.Acquire(ctx, w); err != nil {
			return reservation{}, err
		}
		return reservation{produced: func() { sem.Release(w) }}, nil
	}
}

// inOrder runs produce for items 0..n-1, up to parallelism at once, each
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
func inOrder[T any](parent context.Context, n, parallelism int, reserve func(context.Context, int) (reservation, error),
	produce func(context.Context, int, func(T) bool) error, use func(T) bool, release func(T)) error {
	ctx, cancel := context.WithCancel(parent)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	queue := make(chan queued[T], parallelism)
	// At most parallelism items are produced at once: a slot is taken
	// before a producer starts and given back when it is done.
	slots := make(chan struct{}, parallelism)
	wg.Go(func() {
		defer close(queue)
		for i := range n {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			// A producer that failed cancels before it gives its slot
			// back: none starts after a failure, so the requests a scan
			// makes do not depend on the scheduler.
			if ctx.Err() != nil {
				<-slots
				return
			}
			res, err := reserve(ctx, i)
			if err != nil {
				<-slots
				if ctx.Err() == nil {
					failed := make(chan item[T], 1)
					failed <- item[T]{err: err}
					close(failed)
					queue <- queued[T]{ch: failed}
				}
				return
			}
			ch := make(chan item[T], 2)
			select {
			case queue <- queued[T]{ch: ch, res: res}:
			case <-ctx.Done():
				<-slots
				res.afterProduce()
				res.afterUse()
				return
			}
			wg.Go(func() {
				defer func() { <-slots; res.afterProduce() }()
				defer close(ch)
				err := produce(ctx, i, func(v T) bool {
					select {
					case ch <- item[T]{v: v}:
						return true
					case <-ctx.Done():
						release(v)
						return false
					}
				})
				if err != nil && ctx.Err() == nil {
					ch <- item[T]{err: err}
					cancel()
				}
			})
		}
	})
	var err error
	stopped := false
	// A use that panics (a server cutting an answer short) leaves no
	// reservation taken and nothing emitted unreleased: the rest of the
	// run is given back as a stopped run's would be.
	var cur *queued[T]
	defer func() {
		if r := recover(); r != nil {
			cancel()
			if cur != nil {
				drainQueued(*cur, release)
			}
			for q := range queue {
				drainQueued(q, release)
			}
			panic(r)
		}
	}()
	for q := range queue {
		cur = &q
		for it := range q.ch {
			switch {
			case stopped:
				if it.err == nil {
					release(it.v)
				}
			case it.err != nil:
				err, stopped = it.err, true
				cancel()
			case !use(it.v):
				stopped = true
				cancel()
			}
		}
		cur = nil
		q.res.afterUse()
	}
	if !stopped && parent.Err() != nil {
		return parent.Err()
	}
	return err
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
