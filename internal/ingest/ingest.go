// Package ingest decodes rows that come from outside the process — Arrow
// IPC streams, JSON lines, CSV and Parquet files — into batches of a
// table's schema, without trusting the input.
//
// Invariants:
//
//   - Nothing an input declares is allocated before it is checked: IPC
//     message metadata is verified (every vector and string inside its
//     bytes, body lengths within the request's limit) before arrow-go's
//     reader sees it, and every allocation made while decoding counts
//     against a budget (Options.MaxDecoded); past it, decoding stops with
//     ErrTooLarge.
//   - Every batch returned has passed evolve.Conform: valid Arrow data, the
//     table's schema exactly, no null where a field forbids one. Errors name
//     the row (counted over the whole input), the column and both types.
//     An input of no rows whose columns do not fit is refused as one with
//     rows would be (a schema-only stream, a header-only CSV, a Parquet
//     file of no row groups).
//   - Decoding never panics on any input; a panic inside a decoder becomes
//     an error.
//   - Decoding is all or nothing: on error, no batch is returned (those
//     made so far are released).
package ingest

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/table/evolve"
)

// ErrTooLarge: the input, or what it decodes to, is over the limit.
var ErrTooLarge = errors.New("input is over the size limit")

// Options bound and shape decoding. Zero values mean defaults.
type Options struct {
	// Limit is the largest input in bytes (default 64 MiB).
	Limit int64
	// MaxDecoded bounds the memory decoding may hold at once (default four
	// times Limit, and at least 64 MiB): compressed IPC bodies may expand
	// that much, and builders allocate ahead.
	MaxDecoded int64
	// ChunkRows: rows per batch for text formats (default 8192).
	ChunkRows int
	// IgnoreUnknown drops input columns the table does not have instead of
	// refusing the input.
	IgnoreUnknown bool
	// Lines, when not nil, is given the line of each row a text format
	// (CSV, JSON lines) decodes, in order: a caller that holds the rows
	// names a row its later checks refuse by its line (AtLine).
	Lines *Lines
}

// Lines are the lines of a text input's rows (Options.Lines), and its
// format's name ("CSV", "JSON").
type Lines struct {
	Format string
	Of     []int64
}

// AtLine names the line an *evolve.InputError about row row of the input
// is on, when lines knows it; other errors pass as they are.
func AtLine(err error, lines *Lines) error {
	if lines == nil {
		return err
	}
	return atLine(err, lines.Format, 0, lines.Of)
}

func (o Options) withDefaults() Options {
	if o.Limit <= 0 {
		o.Limit = 64 << 20
	}
	if o.MaxDecoded <= 0 {
		o.MaxDecoded = max(4*o.Limit, 64<<20)
	}
	if o.ChunkRows <= 0 {
		o.ChunkRows = 8192
	}
	return o
}

// budget is an allocator that refuses to hand out more than limit bytes
// at once. arrow-go's allocator interface cannot return an error, so an
// allocation past the limit panics with errOverBudget; the decoders turn
// that panic (which arrow-go's IPC reader also recovers) into ErrTooLarge.
type budget struct {
	mem   memory.Allocator
	limit int64
	used  atomic.Int64
	over  atomic.Bool
}

var errOverBudget = errors.New("ingest: decoding memory budget exhausted")

func newBudget(limit int64) *budget {
	return &budget{mem: memory.NewGoAllocator(), limit: limit}
}

func (b *budget) take(n int) {
	if b.used.Add(int64(n)) > b.limit && n > 0 {
		b.used.Add(-int64(n))
		b.over.Store(true)
		panic(errOverBudget)
	}
}

func (b *budget) Allocate(size int) []byte {
	b.take(size)
	return b.mem.Allocate(size)
}

func (b *budget) Reallocate(size int, p []byte) []byte {
	b.take(size - len(p))
	return b.mem.Reallocate(size, p)
}

func (b *budget) Free(p []byte) {
	b.used.Add(-int64(len(p)))
	b.mem.Free(p)
}

// tooLarge says why a limit was hit.
func tooLarge(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrTooLarge, fmt.Sprintf(format, args...))
}

// conformAll conforms raw batches to want, counting rows across them, and
// releases the raw batches. On error nothing is returned.
func conformAll(want *arrow.Schema, raw []arrow.RecordBatch, o Options) ([]arrow.RecordBatch, error) {
	defer release(raw)
	out := make([]arrow.RecordBatch, 0, len(raw))
	var base int64
	for _, rec := range raw {
		c, err := evolve.Conform(want, rec, evolve.ConformOptions{IgnoreUnknown: o.IgnoreUnknown, RowBase: base})
		if err != nil {
			release(out)
			return nil, err
		}
		base += rec.NumRows()
		out = append(out, c)
	}
	return out, nil
}

// checkEmpty checks an input that holds no rows as one holding rows is
// checked: its columns, as schema names them, must fit want (Conform of a
// batch of no rows). Else a file or stream of another table's columns
// would pass for an empty append whenever it carries no rows.
func checkEmpty(want, schema *arrow.Schema, o Options) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &evolve.InputError{Row: -1, Reason: fmt.Sprintf("the input's schema cannot be read: %v", p)}
		}
	}()
	cols := make([]arrow.Array, schema.NumFields())
	for i, f := range schema.Fields() {
		cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, 0)
		defer cols[i].Release()
	}
	rec := array.NewRecordBatch(schema, cols, 0)
	defer rec.Release()
	out, err := evolve.Conform(want, rec, evolve.ConformOptions{IgnoreUnknown: o.IgnoreUnknown})
	if err != nil {
		return err
	}
	out.Release()
	return nil
}

func release(recs []arrow.RecordBatch) {
	for _, r := range recs {
		if r != nil {
			r.Release()
		}
	}
}

// Release releases batches a decoder returned.
func Release(recs []arrow.RecordBatch) { release(recs) }

// Rows counts the rows of batches.
func Rows(recs []arrow.RecordBatch) int64 {
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	return n
}
