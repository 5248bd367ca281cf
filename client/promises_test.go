package client_test

// What package client promises (its doc comment and its methods'), and
// the test that pins each:
//
//   - 429 and 503 answers are retried with backoff a bounded number of
//     times (Options.Retries; -1: none), and Merge's 429 is not retried:
//     TestBusyAnswersAreRetriedABoundedNumberOfTimes; an answer with
//     Retry-After is sent again no sooner than it asks, and not at all
//     when that would end past RetryFor:
//     TestRetryAfterIsWaitedOutWithinRetryFor.
//   - Requests with rows are named, and sent again under the same name
//     after a failure that hides their outcome, for up to RetryFor, so
//     that nothing is stored twice; AppendOnce names an append with the
//     caller's key; the same key with other rows is refused: through a
//     real server in package server, TestNamedRequestsAreStoredOnce,
//     TestANamedCreateSentAgainAnswersItsTable,
//     TestAnAppendWhoseOutcomeIsUnknownIsStoredOnce (and e2e's
//     idempotent tests).
//   - An answer whose message claims more than MaxMessageBytes is refused
//     before memory is allocated for it: TestAnAnswerClaimingAHugeBodyIsRefused.
//   - CheckpointLSM waits for the memtables that held entries written
//     before it began, not for newer ones, ends under sustained writes,
//     never asks for a merge while one runs, and fails after MaxStalls
//     polls without progress: TestACheckpointWaitsForTheMemtableThatHeldItsEntries,
//     TestACheckpointEndsUnderSustainedWrites, TestACheckpointWithoutProgressFails.
//   - Options are validated: in package server,
//     TestServerAndClientOptionsAreValidated.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/client"
)

// A server that answers every request 503 (or 429) sees each request
// Retries+1 times; with Retries -1, once; Merge's 429 once.
func TestBusyAnswersAreRetriedABoundedNumberOfTimes(t *testing.T) {
	var requests atomic.Int64
	status := http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(status)
	}))
	defer srv.Close()
	for _, c := range []struct {
		status, retries int
		merge           bool
		want            int64
	}{
		{http.StatusServiceUnavailable, 3, false, 4},
		{http.StatusTooManyRequests, 2, false, 3},
		{http.StatusServiceUnavailable, -1, false, 1},
		{http.StatusTooManyRequests, 3, true, 1},
	} {
		status = c.status
		requests.Store(0)
		cl, err := client.New(srv.URL, &client.Options{Retries: c.retries, BaseBackoff: time.Microsecond, MaxBackoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if c.merge {
			err = cl.Merge(context.Background(), "t")
		} else {
			_, err = cl.Describe(context.Background(), "t")
		}
		if !client.IsStatus(err, c.status) || requests.Load() != c.want {
			t.Fatalf("status %d, Retries %d, merge %v: %d requests and %v; want %d requests", c.status, c.retries, c.merge, requests.Load(), err, c.want)
		}
	}
}

// A 429 with Retry-After (seconds, or an HTTP date) is sent again no
// sooner than the server asked; one asking for longer than RetryFor
// leaves is not sent again, its error the answer.
func TestRetryAfterIsWaitedOutWithinRetryFor(t *testing.T) {
	var requests atomic.Int64
	var mu sync.Mutex // guards after, last and gap
	var after string
	var last time.Time
	var gap time.Duration
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if requests.Add(1) == 1 {
			last = now
			w.Header().Set("Retry-After", after)
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		gap = now.Sub(last)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"name":"t","version":1}`))
	}))
	defer srv.Close()
	cl, err := client.New(srv.URL, &client.Options{BaseBackoff: time.Microsecond, MaxBackoff: time.Millisecond, RetryFor: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, header := range []func() string{
		func() string { return "1" },
		func() string { return time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat) },
	} {
		a := header()
		mu.Lock()
		after = a
		mu.Unlock()
		requests.Store(0)
		if _, err := cl.Describe(context.Background(), "t"); err != nil || requests.Load() != 2 {
			t.Fatalf("Retry-After %q: %d requests and %v; want 2 and the answer", a, requests.Load(), err)
		}
		// An HTTP date has whole seconds: the wait it asks for is at least
		// what is left of the second after the one it names.
		mu.Lock()
		g := gap
		mu.Unlock()
		if g < 900*time.Millisecond {
			t.Fatalf("Retry-After %q: sent again after %v", a, g)
		}
	}
	mu.Lock()
	after = "3600"
	mu.Unlock()
	requests.Store(0)
	if _, err := cl.Describe(context.Background(), "t"); !client.IsStatus(err, http.StatusTooManyRequests) || requests.Load() != 1 {
		t.Fatalf("Retry-After an hour, RetryFor 10s: %d requests and %v; want 1 and the 429", requests.Load(), err)
	}
}
