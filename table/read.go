package table

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// opened is a fragment ready to decode: its footer read, the row groups
// the scan reads chosen, its bytes fetched (small), streaming (read
// whole) or fetched ahead by a prefetcher.
type opened struct {
	f      *format.Fragment
	fr     *pqarrow.FileReader
	src    parquet.ReaderAtSeeker
	pre    *format.Prefetcher
	md     *metadata.FileMetaData
	lay    *layout // where the read columns lie in it
	rgs    []int   // the row groups read
	starts []int64 // each row group's first row
	wanted []uint32
	// parallel: row groups decoded at once.
	parallel int
	// streamLater: opened through its tail alone (a scan with a Memory
	// budget); decode streams the rest once the weight is reserved.
	streamLater bool
	closeOnce   sync.Once
}

// close ends the requests still in flight for the fragment's source.
// Closing again does nothing more.
func (o *opened) close() {
	o.closeOnce.Do(func() { fragment.CloseSource(o.src) })
}

// readFragment reads one fragment's matching rows and hands them to emit,
// which takes ownership; emit returns false to stop. An object that is not
// in the bucket is a *MissingDataError naming it.
func (p *scanPlan) readFragment(ctx context.Context, f *format.Fragment, emit func(arrow.RecordBatch) bool) error {
	o, err := p.open(ctx, f, false)
	if err != nil {
		return err
	}
	defer o.close()
	return p.decode(ctx, o, emit)
}

// fragmentError is the error of reading fragment f from src: a panic of
// the Parquet reader a damaged object, the failure of src's requests
// rather than what the reader made of the bytes they never brought, and
// an object not in the bucket a *MissingDataError naming it.
func (p *scanPlan) fragmentError(f *format.Fragment, src parquet.ReaderAtSeeker, r any, err error) error {
	if r != nil {
		err = format.Corrupt(f.Key, "parquet data is damaged", fmt.Errorf("%v", r))
	}
	err = fragment.ReadFailure(src, err)
	if errors.Is(err, blob.ErrNotFound) && !errors.Is(err, format.ErrMissingData) {
		key := f.Key
		if f.Deletion != nil && !strings.Contains(err.Error(), f.Key) {
			key = f.Deletion.Key
		}
		err = &format.MissingDataError{Version: p.s.m.Version, Keys: []string{key},
			Detail: fmt.Sprintf("fragment %d", f.ID), Err: err}
	}
	return err
}

// open reads fragment f's footer (a small fragment whole) and chooses
// the row groups to read. With ahead set (a scan with a Memory budget,
// opening fragments before their reservation) a fragment to be read
// whole is opened through its tail alone: its body is streamed by decode.
func (p *scanPlan) open(ctx context.Context, f *format.Fragment, ahead bool) (_ *opened, err error) {
	o := &opened{f: f}
	defer func() {
		if r := recover(); r != nil || err != nil {
			err = p.fragmentError(f, o.src, r, err)
			if o.src != nil {
				o.close()
			}
		}
	}()
	streamed := p.whole && f.Bytes > fragment.WholeReadLimit && f.Bytes <= p.opts.ReadAheadBytes
	readAhead := p.opts.ReadAheadBytes
	if ahead && streamed {
		readAhead, o.streamLater = format.TailBytes, true
	}
	if spans, footer, ok := p.spans(f, ahead); ok {
		o.fr, o.src, o.pre, err = fragment.OpenSpans(ctx, p.s.b, f, p.opts.Allocator, p.opts.BatchSize, readAhead, spans, footer,
			p.s.footers.get(f.Key, f.Bytes))
	} else {
		o.fr, o.src, o.pre, err = fragment.Open(ctx, p.s.b, f, p.opts.Allocator, p.opts.BatchSize, readAhead, p.whole && !ahead)
	}
	if err != nil {
		return nil, err
	}
	p.rememberFooter(o)
	o.md = o.fr.ParquetReader().MetaData()
	o.lay = p.layoutOf(o.md)
	if o.md.NumRows != f.Rows {
		return nil, format.Corrupt(f.Key, fmt.Sprintf("holds %d rows, the manifest says %d", o.md.NumRows, f.Rows), nil)
	}
	if p.opts.rows != nil {
		o.wanted = slices.Clone(p.opts.rows[f.ID])
		slices.Sort(o.wanted)
		o.wanted = slices.Compact(o.wanted)
	}
	// The row groups to read: those the filter's statistics and the wanted
	// rows do not rule out. Read by ranges, their column chunks are fetched
	// ahead, a few at once, while earlier ones are decoded.
	o.starts = make([]int64, o.md.NumRowGroups())
	var at int64
	for rg := 0; rg < o.md.NumRowGroups(); rg++ {
		rgmd := o.md.RowGroup(rg)
		rows := rgmd.NumRows()
		skip := false
		switch {
		case p.pred != nil && !p.pred.MayMatch(p.rowGroupStats(rgmd, o.lay)):
			skip = true
		case p.opts.Slice != nil && (at >= p.opts.Slice.Hi || at+rows <= p.opts.Slice.Lo):
			skip = true
		case o.wanted != nil:
			lo, _ := slices.BinarySearch(o.wanted, uint32(at))
			skip = lo == len(o.wanted) || int64(o.wanted[lo]) >= at+rows // no wanted row in this row group
		}
		if !skip {
			o.rgs = append(o.rgs, rg)
		}
		o.starts[rg] = at
		at += rows
	}
	if at != f.Rows {
		return nil, format.Corrupt(f.Key, fmt.Sprintf("row groups hold %d rows, the manifest says %d", at, f.Rows), nil)
	}
	// A large fragment's row groups are decoded a few at once, each by a
	// reader of its own over the same source and footer, and handed on in
	// order. Streamed, up to four at once whatever the cores: each waits
	// for its bytes, which arrive together.
	o.parallel = 1
	if f.Bytes > fragment.WholeReadLimit && len(o.rgs) > 1 {
		at := max(runtime.GOMAXPROCS(0), 2)
		if _, ok := o.src.(*fragment.Stream); ok || o.streamLater {
			at = 4
		}
		o.parallel = min(len(o.rgs), at, 4)
	}
	return o, nil
}

// rememberFooter keeps the footer of an opened fragment, read whole or
// from the tail a prefetcher fetched, for the snapshot's scans to come.
//
// Only a fragment whose entry says where its bytes lie is read by its
// spans, where a footer kept saves a request. A scan with a Memory
// budget (a server's, of a snapshot opened for it alone) keeps none: what
// it holds is what the budget counts.
func (p *scanPlan) rememberFooter(o *opened) {
	if len(o.f.Chunks) == 0 || o.f.Footer <= 0 || p.opts.Memory != nil || p.s.footers.get(o.f.Key, o.f.Bytes) != nil {
		return
	}
	switch src := o.src.(type) {
	case *bytes.Reader:
		// The object in memory: its footer read out into a buffer of its
		// own, the length its trailer says (the reader trusted it).
		size := src.Size()
		var trailer [8]byte
		if _, err := src.ReadAt(trailer[:], size-8); err != nil {
			return
		}
		if n, ok := format.FooterLen(trailer[:]); ok && n+12 <= size {
			footer := make([]byte, n+8)
			if _, err := src.ReadAt(footer, size-n-8); err == nil {
				p.s.footers.keep(o.f.Key, footer)
			}
		}
	case *format.Prefetcher:
		p.s.footers.remember(o.f.Key, o.f.Bytes, src.Tail())
	}
}

// spans returns where the bytes of f a scan reading some of its columns
// needs lie, when f's entry records them for the table's schema as it is
// and they are few enough that asking for them (and its footer) beats
// reading the object whole: at most half a small fragment, any part of a
// larger one, whose footer would otherwise cost a round trip of its own.
// Opened ahead of its reservation (a scan with a Memory budget), a
// fragment holds no more than a small one would (OpenAheadBytes). One no
// larger than the tail a ranged read asks for first is read whole: one
// request, not two, in the same round trip.
func (p *scanPlan) spans(f *format.Fragment, ahead bool) ([]format.Span, [2]int64, bool) {
	if p.whole || len(f.Chunks) == 0 || f.SchemaID != p.schemaID || f.Bytes <= format.TailBytes {
		return nil, [2]int64{}, false
	}
	// A filter, the rows taken or a slice may rule out some of a
	// fragment's row groups, which only its footer tells: its chunks are
	// asked for once it is read, unless it has one row group alone.
	if (p.pred != nil || p.opts.rows != nil || p.opts.Slice != nil) && len(f.Chunks)-1 > p.leaves {
		return nil, [2]int64{}, false
	}
	spans, footer, ok := f.Spans(p.lay.leaves, p.leaves)
	if !ok {
		return nil, footer, false
	}
	n := footer[1]
	for _, s := range spans {
		n += s.Len
	}
	if f.Bytes <= fragment.WholeReadLimit && 2*n > f.Bytes || ahead && n > fragment.WholeReadLimit {
		return nil, footer, false
	}
	return spans, footer, true
}

// decode reads the rows of an opened fragment and hands them to emit (see
// readFragment).
func (p *scanPlan) decode(ctx context.Context, o *opened, emit func(arrow.RecordBatch) bool) (err error) {
	f := o.f
	defer func() {
		if r := recover(); r != nil || err != nil {
			err = p.fragmentError(f, o.src, r, err)
		}
	}()
	deleted, err := format.ReadDeletions(ctx, p.s.b, f)
	if err != nil {
		return err
	}
	if o.streamLater {
		// The tail the footer was read from is the stream's first range.
		tail := o.pre.Tail()
		fragment.CloseSource(o.pre)
		st := fragment.NewStreamFrom(ctx, p.s.b, f, tail)
		o.src, o.pre = st, nil
		if o.fr, err = fragment.NewReader(st, o.md, p.opts.Allocator, p.opts.BatchSize); err != nil {
			return format.Corrupt(f.Key, "not a readable parquet file", err)
		}
	}
	if o.pre != nil {
		o.pre.Prefetch(fragment.ChunkRanges(o.md, o.rgs, o.lay.leaves))
	}
	readRowGroup := func(ctx context.Context, i int, emit func(arrow.RecordBatch) bool) error {
		return p.readRowGroup(ctx, o, i, deleted, emit)
	}
	if o.parallel > 1 {
		return format.InOrder(ctx, len(o.rgs), o.parallel, format.Weighed(int64(o.parallel), func(int) int64 { return 1 }), readRowGroup,
			emit, func(rec arrow.RecordBatch) { rec.Release() })
	}
	for i := range o.rgs {
		stopped := false
		err := readRowGroup(ctx, i, func(rec arrow.RecordBatch) bool {
			stopped = !emit(rec)
			return !stopped
		})
		if err != nil || stopped {
			return err
		}
	}
	return nil
}

// readRowGroup reads the i-th row group read of an opened fragment.
func (p *scanPlan) readRowGroup(ctx context.Context, o *opened, i int, deleted []uint32, emit func(arrow.RecordBatch) bool) (err error) {
	f, rg := o.f, o.rgs[i]
	defer func() {
		if r := recover(); r != nil {
			err = format.Corrupt(f.Key, fmt.Sprintf("row group %d is damaged", rg), fmt.Errorf("%v", r))
		}
	}()
	if st, ok := o.src.(*fragment.Stream); ok {
		// The row groups' reads end when they do (another failed, the
		// caller stopped): a read waiting for bytes does not see ctx.
		defer context.AfterFunc(ctx, st.Close)()
	}
	r := o.fr
	if o.parallel > 1 {
		if r, err = fragment.NewReader(o.src, o.md, p.opts.Allocator, p.opts.BatchSize); err != nil {
			return format.Corrupt(f.Key, fmt.Sprintf("row group %d", rg), err)
		}
	}
	// Held in memory or streamed, a row group's columns are decoded one
	// after another (its row groups a few at once, above), in the order
	// their bytes lie in the object; read by ranges, at
	// once, so that their chunks' reads are in flight together (one
	// after another, a full scan of the benchmark's 45 MB fragment
	// read 16 MiB at a time through MinIO behind a 20 ms proxy took
	// 183-289 ms against 132-231 ms). Decoding them in the Parquet
	// reader's parallel mode instead, where a damaged page killed the
	// process, took as long (24 scans each after the first: median
	// 141 ms both).
	next, release, err := p.rowGroupBatches(ctx, o, r, rg)
	if err != nil {
		return format.Corrupt(f.Key, fmt.Sprintf("row group %d", rg), err)
	}
	defer release()
	offset := o.starts[rg]
	for {
		rec, err := next()
		if err != nil {
			return format.Corrupt(f.Key, fmt.Sprintf("row group %d", rg), err)
		}
		if rec == nil {
			return nil
		}
		out, err := p.filter(ctx, f, rec, offset, deleted, o.wanted)
		offset += rec.NumRows()
		rec.Release()
		if err != nil {
			return err
		}
		if out != nil && !emit(out) {
			return nil
		}
	}
}

// rowGroupBatches returns the reader of row group rg of an opened
// fragment through r: next yields its batches of the plan's read columns
// (nil at the end; the caller releases each), a column the fragment lacks
// as nulls; the caller calls release when done.
func (p *scanPlan) rowGroupBatches(ctx context.Context, o *opened, r *pqarrow.FileReader, rg int) (next func() (arrow.RecordBatch, error), release func(), err error) {
	if len(o.lay.leaves) == 0 {
		// None of the columns read is in the fragment: nulls, as many
		// rows as the row group holds.
		left := o.md.RowGroup(rg).NumRows()
		return func() (arrow.RecordBatch, error) {
			if left <= 0 {
				return nil, nil
			}
			n := min(left, int64(p.opts.BatchSize))
			left -= n
			return p.nulls(n), nil
		}, func() {}, nil
	}
	rr, err := fragment.NewRowGroupReader(ctx, r, p.opts.Allocator, o.lay.leaves, rg, int64(p.opts.BatchSize), o.pre != nil)
	if err != nil {
		return nil, nil, err
	}
	return func() (arrow.RecordBatch, error) {
		rec, err := rr.Next()
		if rec == nil || err != nil || !o.lay.missing {
			return rec, err
		}
		defer rec.Release()
		return p.fill(o.lay, rec), nil
	}, rr.Release, nil
}
