package table

import (
	"context"
	"fmt"
	"iter"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
)

// ScanOptions shape a scan. The zero value reads every column of every
// live row.
type ScanOptions struct {
	Columns   []string       // projection; nil means every column
	Filter    expr.Predicate // nil means every row
	BatchSize int            // rows per batch read; 0 means 8192
	// Parallelism: fragments read at once; 0 means DefaultParallelism,
	// or DefaultMemoryParallelism with a Memory budget. ReadAheadBytes
	// bounds what they fetch.
	Parallelism int
	// ReadAheadBytes bounds the bytes of the fragment objects read at once
	// (a larger fragment is read alone); 0 means 64 MiB. With a Memory
	// budget, it bounds what one fragment has fetched and not yet
	// decoded: a fragment up to its size, read whole, is streamed; a
	// larger one's column chunks are fetched ahead up to it.
	ReadAheadBytes int64
	// Memory, when set, is a budget the scan reserves from, for each
	// fragment in order, what reading it holds (see Memory); besides,
	// it holds OpenAheadBytes(Parallelism).
	Memory Memory
	// Hold, when set, is reserved for the rows a read keeps in memory
	// from before its first batch to its end rather than streams — a
	// fresh read's WAL rows (walshard.ScanFleet) — and given back at its
	// end. A scan of fragments does not use it.
	Hold Memory
	// Allocator allocates the batches; nil means the Go allocator.
	Allocator memory.Allocator
	// Fragments restricts the scan to these fragment ids (nil: all).
	Fragments []uint64
	// Slice, when set, restricts the scan to the rows of one fragment at
	// offsets [Lo, Hi): the unit a reader that splits a version between
	// processes reads (the slices of a fragment are disjoint, so each
	// row is read once). A fragment the version does not hold is an
	// error.
	Slice *Slice
	// WithRowAddress adds, for each row, its fragment id and offset
	// (columns "_fragment" and "_offset", uint64 and uint32) at the end.
	WithRowAddress bool

	// rows restricts the scan to these offsets of these fragments (Take).
	rows map[uint64][]uint32
}

// Slice names the rows of one fragment at offsets [Lo, Hi).
type Slice struct {
	Fragment uint64
	Lo, Hi   int64
}

// Row address columns added by ScanOptions.WithRowAddress.
const (
	FragmentColumn = "_fragment"
	OffsetColumn   = "_offset"
)

// A scan's fragments read at once, by default. Most are small (an append
// or a flush each) and each costs a round trip, so a scan keeps many in
// flight, as many as ReadAheadBytes has room for: the benchmark's 200
// fragments of 240 KB, through a store 20 ms away, scanned whole 64 at
// once in 0.22-0.29 s, 32 in 0.29 s, 8 in 0.75 s. With a Memory budget,
// each fragment opened ahead is counted at the most a small one holds
// (OpenAheadBytes), so fewer.
const (
	DefaultParallelism       = 64
	DefaultMemoryParallelism = 8
)

// scanPlan is a scan bound to a schema.
type scanPlan struct {
	s    *Snapshot
	opts ScanOptions
	pred expr.Predicate
	out  *arrow.Schema // output schema (projection, maybe addresses)
	read []string      // columns read: projection ∪ filter columns
	// lay: where the read columns lie in a fragment written under the
	// table's schema as it is (see layoutOf for the others).
	lay layout
	// stored: the stored name of each column of the table, by name.
	stored map[string]string
	// schemaID and leaves: the table's schema's id (evolve.SchemaID) and
	// the number of Parquet leaves of its stored schema.
	schemaID uint64
	leaves   int
	// whole: the scan reads every column of every row (no filter, no
	// rows picked), so a fragment is read whole.
	whole bool
	// readSchema: the table's fields for read; batches from the Parquet
	// reader are brought to it (see AdaptRead).
	readSchema *arrow.Schema
	outIndex   []int // position in read of each projected column
}

func (s *Snapshot) plan(opts ScanOptions) (*scanPlan, error) {
	schema := s.m.Schema()
	p := &scanPlan{s: s, opts: opts}
	if p.opts.BatchSize <= 0 {
		p.opts.BatchSize = 8192
	}
	if p.opts.Parallelism <= 0 {
		p.opts.Parallelism = DefaultParallelism
		if p.opts.Memory != nil {
			p.opts.Parallelism = DefaultMemoryParallelism
		}
	}
	if p.opts.ReadAheadBytes <= 0 {
		p.opts.ReadAheadBytes = 64 << 20
	}
	if p.opts.Allocator == nil {
		p.opts.Allocator = memory.DefaultAllocator
	}
	var err error
	if p.pred, err = expr.Bind(opts.Filter, schema); err != nil {
		return nil, err
	}
	proj := opts.Columns
	if proj == nil {
		for _, f := range schema.Fields() {
			proj = append(proj, f.Name)
		}
	}
	var fields []arrow.Field
	for i, c := range proj {
		idx := schema.FieldIndices(c)
		if len(idx) != 1 {
			return nil, fmt.Errorf("table: scan: %s", format.NoColumn(c, schema))
		}
		if slices.Contains(proj[:i], c) {
			return nil, fmt.Errorf("table: scan: column %q is named twice", c)
		}
		fields = append(fields, evolve.PlainField(schema.Field(idx[0])))
	}
	p.read = slices.Clone(proj)
	if p.pred != nil {
		for _, c := range p.pred.Columns() {
			if !slices.Contains(p.read, c) {
				p.read = append(p.read, c)
			}
		}
	}
	readFields := make([]arrow.Field, len(p.read))
	for i, c := range p.read {
		readFields[i] = evolve.PlainField(schema.Field(schema.FieldIndices(c)[0]))
	}
	p.readSchema = arrow.NewSchema(readFields, nil)
	p.lay = p.planLayout(schema)
	n := 0
	for _, f := range schema.Fields() {
		n += leafCount(f.Type)
	}
	for i := range proj {
		p.outIndex = append(p.outIndex, i)
	}
	if sl := opts.Slice; sl != nil {
		if sl.Lo < 0 || sl.Hi < sl.Lo {
			return nil, fmt.Errorf("table: scan: rows %d to %d of fragment %d: not a range", sl.Lo, sl.Hi, sl.Fragment)
		}
		if !slices.ContainsFunc(s.m.Fragments, func(f format.Fragment) bool { return f.ID == sl.Fragment }) {
			return nil, fmt.Errorf("table: scan: version %d holds no fragment %d", s.m.Version, sl.Fragment)
		}
	}
	p.whole = p.pred == nil && opts.rows == nil && opts.Slice == nil && len(p.lay.leaves) == n
	p.schemaID, p.leaves = evolve.SchemaID(schema), n
	if opts.WithRowAddress {
		fields = append(fields, arrow.Field{Name: FragmentColumn, Type: arrow.PrimitiveTypes.Uint64},
			arrow.Field{Name: OffsetColumn, Type: arrow.PrimitiveTypes.Uint32})
	}
	p.out = arrow.NewSchema(fields, nil)
	return p, nil
}

func leafCount(t arrow.DataType) int {
	switch t := t.(type) {
	case *arrow.StructType:
		n := 0
		for _, f := range t.Fields() {
			n += leafCount(f.Type)
		}
		return n
	case arrow.ListLikeType:
		return leafCount(t.Elem())
	}
	return 1
}

// fragments returns the fragments the scan must read, pruned by manifest
// statistics.
func (p *scanPlan) fragments() []*format.Fragment {
	var only map[uint64]bool // a compaction bin can name thousands
	if p.opts.Fragments != nil {
		only = make(map[uint64]bool, len(p.opts.Fragments))
		for _, id := range p.opts.Fragments {
			only[id] = true
		}
	}
	var out []*format.Fragment
	for i := range p.s.m.Fragments {
		f := &p.s.m.Fragments[i]
		if only != nil && !only[f.ID] || p.opts.Slice != nil && p.opts.Slice.Fragment != f.ID {
			continue
		}
		if p.opts.rows != nil && len(p.opts.rows[f.ID]) == 0 {
			continue
		}
		if f.LiveRows() == 0 || (p.pred != nil && !p.pred.MayMatch(p.statsOf(f))) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// Scan returns the rows of the snapshot as record batches, in fragment
// order. Each batch is released when the loop body returns; Retain it to
// keep it. Memory is bounded by Parallelism fragments' worth of a few
// batches each — with a Memory budget, by the fragments' weights it
// reserves. Scan stops at the first error, which it yields.
func (s *Snapshot) Scan(ctx context.Context, opts ScanOptions) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		p, err := s.plan(opts)
		if err != nil {
			yield(nil, err)
			return
		}
		p.run(ctx, yield)
	}
}

// Schema returns the schema of the batches Scan yields for opts.
func (s *Snapshot) ScanSchema(opts ScanOptions) (*arrow.Schema, error) {
	p, err := s.plan(opts)
	if err != nil {
		return nil, err
	}
	return p.out, nil
}

// run reads up to Parallelism fragments at once and yields their batches
// in fragment order.
func (p *scanPlan) run(ctx context.Context, yield func(arrow.RecordBatch, error) bool) {
	use := func(rec arrow.RecordBatch) bool {
		defer rec.Release()
		return yield(rec, nil)
	}
	var err error
	if p.opts.Memory != nil {
		err = p.runWithin(ctx, p.fragments(), use)
	} else {
		err = format.ReadInOrder(ctx, p.fragments(), p.opts.Parallelism, p.opts.ReadAheadBytes, p.readFragment,
			use, func(rec arrow.RecordBatch) { rec.Release() })
	}
	if err != nil {
		yield(nil, err)
	}
}

// filter applies deletions and the predicate to a batch that starts at
// row offset of fragment f, and projects it; nil when no row is left.
func (p *scanPlan) filter(ctx context.Context, f *format.Fragment, rec arrow.RecordBatch, offset int64, deleted, wanted []uint32) (arrow.RecordBatch, error) {
	rec, err := p.adaptRead(rec)
	if err != nil {
		return nil, format.Corrupt(f.Key, "a column does not read back as the table's type", err)
	}
	defer rec.Release()
	n := int(rec.NumRows())
	// Deleted offsets that fall in this batch.
	lo, _ := slices.BinarySearch(deleted, uint32(offset))
	hi, _ := slices.BinarySearch(deleted, uint32(offset+int64(n)))
	dels := deleted[lo:hi]
	var keep []bool
	kept := n
	var cols map[string]arrow.Array
	if p.pred != nil {
		cols = make(map[string]arrow.Array, len(p.read))
		for i, c := range p.read {
			cols[c] = rec.Column(i)
		}
	}
	if wanted != nil {
		wlo, _ := slices.BinarySearch(wanted, uint32(offset))
		whi, _ := slices.BinarySearch(wanted, uint32(offset+int64(n)))
		want := map[int]bool{}
		for _, w := range wanted[wlo:whi] {
			want[int(int64(w)-offset)] = true
		}
		keep = make([]bool, n)
		kept = 0
		d := 0
		for i := range n {
			for d < len(dels) && int64(dels[d]) < offset+int64(i) {
				d++
			}
			if want[i] && !(d < len(dels) && int64(dels[d]) == offset+int64(i)) && (p.pred == nil || p.pred.Match(cols, i)) {
				keep[i] = true
				kept++
			}
		}
	} else if rlo, rhi := p.sliceOf(offset, n); p.pred != nil || len(dels) > 0 || rlo > 0 || rhi < n {
		keep = make([]bool, n)
		kept = 0
		d := 0
		for i := range n {
			deleted := d < len(dels) && int64(dels[d]) == offset+int64(i)
			if deleted {
				d++ // also for a row outside the slice: the cursor follows the rows
			}
			if deleted || i < rlo || i >= rhi {
				continue
			}
			if p.pred == nil || p.pred.Match(cols, i) {
				keep[i] = true
				kept++
			}
		}
	}
	if kept == 0 {
		return nil, nil
	}
	mem := p.opts.Allocator
	out := make([]arrow.Array, 0, len(p.out.Fields()))
	for _, i := range p.outIndex {
		out = append(out, rec.Column(i))
	}
	var addr []arrow.Array
	if p.opts.WithRowAddress {
		fb := array.NewUint64Builder(mem)
		ob := array.NewUint32Builder(mem)
		for i := range n {
			fb.Append(f.ID)
			ob.Append(uint32(offset) + uint32(i))
		}
		addr = []arrow.Array{fb.NewArray(), ob.NewArray()}
		fb.Release()
		ob.Release()
		out = append(out, addr...)
	}
	projected := array.NewRecordBatch(p.out, out, int64(n))
	for _, a := range addr {
		a.Release()
	}
	if kept == n {
		return projected, nil
	}
	mb := array.NewBooleanBuilder(mem)
	mb.AppendValues(keep, nil)
	mask := mb.NewArray()
	mb.Release()
	defer mask.Release()
	defer projected.Release()
	ectx := compute.WithAllocator(ctx, mem)
	rows, err := compute.FilterRecordBatch(ectx, projected, mask, compute.DefaultFilterOptions())
	if err != nil {
		return nil, fmt.Errorf("table: filter %s: %w", f.Key, err)
	}
	return rows, nil
}

// sliceOf is the part [lo, hi) of a batch of n rows at offset that the
// scan's Slice keeps (all of it without one).
func (p *scanPlan) sliceOf(offset int64, n int) (lo, hi int) {
	sl := p.opts.Slice
	if sl == nil {
		return 0, n
	}
	return int(min(max(sl.Lo-offset, 0), int64(n))), int(min(max(sl.Hi-offset, 0), int64(n)))
}

// adaptRead brings a batch read from a fragment to the table's types;
// the caller releases the result.
func (p *scanPlan) adaptRead(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	same := true
	for i, f := range p.readSchema.Fields() {
		if f.Type != rec.Column(i).DataType() {
			same = false
		}
	}
	if same {
		rec.Retain()
		return rec, nil
	}
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, f := range p.readSchema.Fields() {
		a, err := evolve.AdaptRead(p.opts.Allocator, f.Type, rec.Column(i))
		if err != nil {
			return nil, err
		}
		cols[i] = a
	}
	return array.NewRecordBatch(p.readSchema, cols, rec.NumRows()), nil
}

// ScanBatches applies opts' projection and filter to in-memory batches of
// the given schema (a writer's memtable, say), as Scan does to fragments.
// Fragments, deletions and row addresses do not apply.
func ScanBatches(ctx context.Context, schema *arrow.Schema, batches []arrow.RecordBatch, opts ScanOptions) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		opts.WithRowAddress = false
		p, err := SnapshotOf(nil, schema, nil).plan(opts)
		if err != nil {
			yield(nil, err)
			return
		}
		f := &format.Fragment{}
		for _, rec := range batches {
			// Bring the batch to the plan's read columns.
			cols := make([]arrow.Array, len(p.read))
			for i, c := range p.read {
				cols[i] = rec.Column(schema.FieldIndices(c)[0])
			}
			fields := make([]arrow.Field, len(p.read))
			for i, c := range p.read {
				fields[i] = schema.Field(schema.FieldIndices(c)[0])
			}
			in := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
			out, err := p.filter(ctx, f, in, 0, nil, nil)
			in.Release()
			if err != nil {
				yield(nil, err)
				return
			}
			if out == nil {
				continue
			}
			ok := yield(out, nil)
			out.Release()
			if !ok {
				return
			}
		}
	}
}
