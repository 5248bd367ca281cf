package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/table"
)

// The server bounds what clients can make it hold:
//
//   - a body over MaxBodyBytes is refused (413), at once when its declared
//     length says so;
//   - a body must keep arriving at MinBodyRate after BodyGrace, so that a
//     client trickling bytes cannot hold a request (and its memory) open;
//   - requests that hold data — appends, creates with rows, scans,
//     takes — reserve what they will hold of MemoryBudget (see budget):
//     writes in a share of their own, so that readers cannot starve
//     them; when their part is spent a request waits up to BusyWait,
//     then is answered 429 with Retry-After;
//   - a take asks for at most MaxTakeKeys keys.

// errBusy: the memory budget is spent.
var errBusy = &apiError{http.StatusTooManyRequests, api.CodeBusy, "the server's memory budget is in use by other requests; retry shortly"}

// Per-request reservations against the memory budget.
const (
	// A scan reads scanParallelism fragments at once, in batches of
	// scanBatchRows rows, fetching up to scanReadAhead bytes of column
	// chunks ahead of their decoding; each fragment reserves its weight
	// (table.Memory). It holds besides the fragments it opened ahead
	// (table.OpenAheadBytes) and what encoding its answer buffers, at
	// most scanEncodeBytes (a large value is written in pieces).
	scanParallelism = 2
	scanBatchRows   = 1024
	scanReadAhead   = 32 << 20
	scanEncodeBytes = 1 << 20
	// appendFactor: an append holds its decoded rows, their WAL entry and
	// their memtable copy: about three times the body.
	appendFactor = 3
	// takeRowReserve: what one key of a take may bring back (a row with
	// its blobs), counted against the budget.
	takeRowReserve = 8 << 10
)

// FixedOverhead is what a server holds besides its memory budget, and
// what its process's resident memory may pass the budget by: the
// binary's code mapped from its file (56 MiB measured), the Go runtime,
// goroutines and buffers of open connections (about 20 MiB idle,
// measured), the memtable of a table written steadily up to its flush
// (the shard's FlushBytes, 64 MiB), and garbage not yet collected. A
// memtable held past its flush — flushes falling behind — comes on top,
// up to the shard's MaxMemtableBytes a table.
const FixedOverhead = 192 << 20

// goOverhead is the part of FixedOverhead that Go's soft memory limit
// allows beyond the budget. The rest is the binary's code, which the
// limit does not count, and what the heap passes its soft limit by
// before the collector catches up (15 MiB measured under sixteen scans).
const goOverhead = 96 << 20

// MemoryLimit is the Go runtime's soft memory limit for a server of the
// given memory budget, which `strata serve` sets: the budget and
// goOverhead. Under it, the heap does not grow to twice what is live, as
// the garbage collector would otherwise let it, but is collected sooner;
// so the process's peak RSS stays within the budget and FixedOverhead.
func MemoryLimit(budget int64) int64 {
	if budget <= 0 {
		budget = 1 << 30
	}
	return budget + goOverhead
}

// scanHold is what a scan holds from its start to its end.
var scanHold = table.OpenAheadBytes(scanParallelism) + scanEncodeBytes

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

// retryAfter sets the header a 429 carries.
func retryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(d/time.Second))))
}
