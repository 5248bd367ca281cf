// Package backoff is how Strata waits between attempts: jittered
// exponential delays under a cap, sleeps that end with their context, and
// one retry loop built from them. Every retry in the engine, the server's
// background work and the client goes through it, so each has the same
// shape and each stops when its context does.
//
// Budgets are the caller's: Retry takes a number of attempts (RetryFor
// also a time to keep trying for), and a caller that also re-plans
// (plans, commits, plans again on a conflict) bounds the re-plans apart
// from the commit's own attempts.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy is a jittered exponential backoff: attempt n waits a random time
// in [0, min(Base·2^(n−1), Max)] ("full jitter", which spreads writers that
// lost the same race).
type Policy struct {
	Base, Max time.Duration
}

// Delay returns the wait before retry n (n ≥ 1).
func (p Policy) Delay(n int) time.Duration {
	d := p.Base << min(max(n-1, 0), 30)
	if d > p.Max || d <= 0 {
		d = p.Max
	}
	if d <= 0 {
		return 0
	}
	return rand.N(d + 1)
}

// Sleep waits d, or until ctx is done; it returns ctx's error then.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Retry runs op until it succeeds, returns an error retryable refuses,
// or has run attempts times, sleeping p.Delay between runs. It returns
// op's last error, or ctx's error when ctx ends during a sleep.
func Retry(ctx context.Context, p Policy, attempts int, retryable func(error) bool, op func() error) error {
	return RetryFor(ctx, p, attempts, 0, retryable, op)
}

// RetryFor is Retry that goes on past attempts until d has passed since
// its first run: for what must not give up while a store is briefly away
// (a restart, a failover), yet must not give up early on a fast one.
func RetryFor(ctx context.Context, p Policy, attempts int, d time.Duration, retryable func(error) bool, op func() error) error {
	until := time.Now().Add(d)
	var err error
	for n := 1; ; n++ {
		if err = op(); err == nil || !retryable(err) || n >= attempts && !time.Now().Before(until) {
			return err
		}
		if serr := Sleep(ctx, p.Delay(n)); serr != nil {
			return serr
		}
	}
}
