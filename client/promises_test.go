package client_test

// What package client promises (its doc comment and its methods'), and
// the test that pins each:
//
//   - 429 and 503 answers are retried with backoff a bounded number of
//     times (Options.Retries; -1: none), and Merge's 429 is not retried:
//     TestBusyAnswersAreRetriedABoundedNumberOfTimes.
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
