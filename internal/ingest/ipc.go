package ingest

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/stratadb/strata/internal/ipcguard"
	"github.com/stratadb/strata/table/evolve"
)

// maxMetadata bounds one IPC message's metadata: a schema or the
// description of one batch's buffers, a few KiB in practice.
const maxMetadata = 4 << 20

// ReadIPC decodes a whole Arrow IPC stream and returns its schema and its
// batches conformed to want. With want nil, the batches are conformed to
// the stream's own schema, normalized (dictionaries decoded): what a new
// table made from the stream would hold.
func ReadIPC(r io.Reader, want *arrow.Schema, o Options) (schema *arrow.Schema, recs []arrow.RecordBatch, err error) {
	o = o.withDefaults()
	lr := &limited{r: r, left: o.Limit}
	g := ipcguard.New(lr, maxMetadata, o.Limit, o.Limit)
	mem := newBudget(o.MaxDecoded)
	var raw []arrow.RecordBatch
	defer func() {
		if p := recover(); p != nil {
			release(raw)
			schema, recs, err = nil, nil, decodeFailure(g, lr, mem, fmt.Errorf("%v", p))
		}
	}()
	rd, err := ipc.NewReader(g, ipc.WithAllocator(mem), ipc.WithMetadataSizeLimit(maxMetadata), ipc.WithBodySizeLimit(o.Limit))
	if err != nil {
		return nil, nil, decodeFailure(g, lr, mem, err)
	}
	defer rd.Release()
	schema = rd.Schema()
	for rd.Next() {
		rec := rd.RecordBatch()
		rec.Retain()
		raw = append(raw, rec)
	}
	if err := rd.Err(); err != nil {
		release(raw)
		return nil, nil, decodeFailure(g, lr, mem, err)
	}
	if g.Err() != nil { // the guard refused something the reader then swallowed
		release(raw)
		return nil, nil, decodeFailure(g, lr, mem, g.Err())
	}
	if want == nil {
		want = evolve.NormalizeSchema(schema)
	} else if len(raw) == 0 {
		if err := checkEmpty(want, schema, o); err != nil {
			return nil, nil, err
		}
	}
	recs, err = conformAll(want, raw, o)
	if err != nil {
		return nil, nil, err
	}
	return schema, recs, nil
}

// decodeFailure classifies a decoding error: over a limit, or malformed.
func decodeFailure(g *ipcguard.Reader, lr *limited, mem *budget, err error) error {
	if mem.over.Load() || errors.Is(err, errOverBudget) {
		return tooLarge("decoding the Arrow stream needs more than %d bytes", mem.limit)
	}
	if lr.over || g.TooBig() {
		return tooLarge("%v", err)
	}
	if g.Err() != nil {
		err = g.Err()
	}
	return &evolve.InputError{Row: -1, Reason: "not a readable Arrow IPC stream: " + err.Error()}
}

// limited reads at most left bytes from r; reading past that is an error
// of its own type, so that an input over the limit is told from a
// malformed one.
type limited struct {
	r    io.Reader
	left int64
	over bool
}

func (l *limited) Error() string { return "the input is over the size limit" }

func (l *limited) Read(p []byte) (int, error) {
	if l.left <= 0 {
		var one [1]byte
		n, err := l.r.Read(one[:])
		var mbe *http.MaxBytesError
		if n > 0 || errors.As(err, &mbe) {
			l.over = true
			return 0, l
		}
		if err == nil {
			err = io.EOF
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) { // a server's body limit below ours
		l.over = true
		return n, l
	}
	return n, err
}
