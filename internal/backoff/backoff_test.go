package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDelayStaysUnderItsCap(t *testing.T) {
	p := Policy{Base: time.Millisecond, Max: 50 * time.Millisecond}
	for n := 1; n < 100; n++ {
		limit := min(time.Millisecond<<min(n-1, 30), 50*time.Millisecond)
		for range 20 {
			if d := p.Delay(n); d < 0 || d > limit {
				t.Fatalf("Delay(%d) = %v, want within [0, %v]", n, d, limit)
			}
		}
	}
	if d := (Policy{}).Delay(3); d != 0 {
		t.Fatalf("a zero policy waits %v", d)
	}
}

func TestRetryStopsOnSuccessRefusalAttemptsAndContext(t *testing.T) {
	p := Policy{Base: time.Microsecond, Max: time.Microsecond}
	again := errors.New("again")
	yes := func(err error) bool { return errors.Is(err, again) }
	runs := 0
	err := Retry(context.Background(), p, 10, yes, func() error {
		if runs++; runs < 3 {
			return again
		}
		return nil
	})
	if err != nil || runs != 3 {
		t.Fatalf("success on the third run: %v after %d", err, runs)
	}
	runs = 0
	final := errors.New("final")
	if err := Retry(context.Background(), p, 10, yes, func() error { runs++; return final }); err != final || runs != 1 {
		t.Fatalf("a refused error: %v after %d runs", err, runs)
	}
	runs = 0
	if err := Retry(context.Background(), p, 4, yes, func() error { runs++; return again }); err != again || runs != 4 {
		t.Fatalf("attempts spent: %v after %d runs", err, runs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runs = 0
	err = Retry(ctx, Policy{Base: time.Hour, Max: time.Hour}, 10, yes, func() error {
		runs++
		cancel()
		return again
	})
	if !errors.Is(err, context.Canceled) || runs != 1 {
		t.Fatalf("a context ended during the sleep: %v after %d runs", err, runs)
	}
}

func TestRetryForGoesOnPastItsAttemptsUntilItsTime(t *testing.T) {
	p := Policy{Base: time.Millisecond, Max: time.Millisecond}
	again := errors.New("again")
	yes := func(err error) bool { return errors.Is(err, again) }
	runs, start := 0, time.Now()
	if err := RetryFor(context.Background(), p, 2, 30*time.Millisecond, yes, func() error { runs++; return again }); err != again {
		t.Fatalf("RetryFor: %v", err)
	}
	if d := time.Since(start); runs <= 2 || d < 30*time.Millisecond {
		t.Fatalf("%d runs in %v: want more than 2, over 30ms", runs, d)
	}
	runs = 0
	if err := RetryFor(context.Background(), p, 2, time.Hour, yes, func() error {
		if runs++; runs < 5 {
			return again
		}
		return nil
	}); err != nil || runs != 5 {
		t.Fatalf("success on the fifth run: %v after %d", err, runs)
	}
}
