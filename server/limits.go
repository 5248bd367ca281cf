package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/stratadb/strata/api"
)

// The server bounds what clients can make it hold:
//
//   - a body over MaxBodyBytes is refused (413), at once when its declared
//     length says so;
//   - a body must keep arriving at MinBodyRate after BodyGrace, so that a
//     client trickling bytes cannot hold a request (and its memory) open;
//   - requests that hold data in memory — appends, creates with rows,
//     scans, takes — each reserve their share of MemoryBudget before they
//     start; when the budget is spent a request waits up to BusyWait, then
//     is answered 429 with Retry-After;
//   - a take asks for at most MaxTakeKeys keys.

// errBusy: the memory budget is spent.
var errBusy = &apiError{http.StatusTooManyRequests, api.CodeBusy, "the server's memory budget is in use by other requests; retry shortly"}

// Per-request reservations against the memory budget.
const (
	// scanReserve: a scan reads scanParallelism fragments at once, each a
	// whole object of up to 4 MiB or a column chunk at a time, and holds a
	// few batches of scanBatchRows rows.
	scanReserve     = 64 << 20
	scanParallelism = 2
	scanBatchRows   = 1024
	// appendFactor: an append holds its decoded rows, their WAL entry and
	// their memtable copy: about three times the body.
	appendFactor = 3
	// takeRowReserve: what one key of a take may bring back (a row with
	// its blobs), counted against the budget.
	takeRowReserve = 8 << 10
)

type admission struct {
	sem    *semaphore.Weighted
	budget int64
	wait   time.Duration
}

func newAdmission(budget int64, wait time.Duration) *admission {
	return &admission{sem: semaphore.NewWeighted(budget), budget: budget, wait: wait}
}

// admit reserves n bytes of the budget (at most all of it) for a request,
// waiting up to the admission's wait; release gives them back.
func (a *admission) admit(ctx context.Context, n int64) (release func(), err error) {
	n = min(max(n, 1), a.budget)
	if !a.sem.TryAcquire(n) {
		wctx, cancel := context.WithTimeout(ctx, a.wait)
		defer cancel()
		if err := a.sem.Acquire(wctx, n); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, errBusy
		}
	}
	return func() { a.sem.Release(n) }, nil
}

// bodyReserve is what a request's body will make it hold.
func (s *Server) bodyReserve(r *http.Request) int64 {
	n := s.opts.MaxBodyBytes
	if r.ContentLength >= 0 && r.ContentLength < n {
		n = r.ContentLength
	}
	return appendFactor * n
}

// pacedBody is a request body that must keep arriving: after grace, at
// least rate bytes a second on average, enforced with the connection's
// read deadline (so a stalled read ends too).
type pacedBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	grace time.Duration
	rate  int64
	read  int64
	slow  bool  // a read ran past the deadline
	bad   error // the body's framing failed: a malformed chunk, a cut-off body
}

func (p *pacedBody) Read(b []byte) (int, error) {
	deadline := p.start.Add(p.grace + time.Duration(float64(p.read)/float64(p.rate)*float64(time.Second)))
	_ = p.rc.SetReadDeadline(deadline)
	n, err := p.ReadCloser.Read(b)
	p.read += int64(n)
	var ne net.Error
	switch {
	case err == nil || err == io.EOF:
	case errors.As(err, &ne) && ne.Timeout():
		p.slow = true
	default:
		p.bad = err
	}
	return n, err
}

type paceKey struct{}

// bodyFault reports whether reading the request's body failed, whatever
// error decoding it gave: cut off for arriving too slowly (408), or its
// framing broken — a malformed chunked encoding, a body that ended before
// its length (400 bad_framing, and the connection closes: where the next
// request would start is unknown).
func bodyFault(r *http.Request) error {
	p, ok := r.Context().Value(paceKey{}).(*pacedBody)
	switch {
	case !ok:
		return nil
	case p.slow:
		return &apiError{http.StatusRequestTimeout, api.CodeBodyTooSlow,
			fmt.Sprintf("the request body arrived slower than %d bytes/s after %v", p.rate, p.grace)}
	case p.bad != nil:
		return &apiError{http.StatusBadRequest, api.CodeBadFraming, "the request body's framing is broken: " + p.bad.Error()}
	}
	return nil
}

// badFraming answers 400 bad_framing and closes the connection after it.
func badFraming(w http.ResponseWriter, why string) {
	w.Header().Set("Connection", "close")
	writeError(w, http.StatusBadRequest, api.CodeBadFraming, why)
}

// retryAfter sets the header a 429 carries.
func retryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(d/time.Second))))
}
