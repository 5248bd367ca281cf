package compactor

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// A table with a cluster key (format.Manifest.ClusterBy) is compacted
// into fragments whose rows are sorted by it: each bin is read, sorted in
// memory and written in row groups of about ClusteredRowGroupBytes, whose
// statistics then rule out all but the few a filter on the key matches.
// A bin holding more than the memory budget sorts at once (sortShares) is
// sorted in runs, each spilled to the store sorted and the spills merged
// (clustermerge.go): one sorted fragment a bin, whatever its size. A
// fragment records the key it is sorted by (SortedBy); a compaction sorts
// every fragment not sorted by the table's key, alone if need be, and a
// large one makes compaction due (ShouldCompact).
//
// A table with a key index is never sorted (commit.ErrClusteredIndex
// keeps the two apart): the index's remap entries say where a
// compaction put a row by its rank among the bin's rows.

// ClusteredRowGroupBytes is the decoded size of a sorted fragment's row
// groups (a row group holds at least one row, at most
// fragment.RowGroupRows): a filter matching 1% of a table clustered by
// the column it names reads about 1% of the row groups, plus one at each
// end of the range.
const ClusteredRowGroupBytes = 1 << 20

// clusterKey is the table's cluster key when compaction sorts by it:
// the stored names, and the columns' indices in the table's schema.
type clusterKey struct {
	stored  []string
	indices []int
}

// clusterOf returns m's cluster key, nil when m has none that sorts (no
// key, a column gone from the schema, or a key index).
func clusterOf(m *format.Manifest) *clusterKey {
	if len(m.ClusterBy) == 0 || len(m.Indexes) > 0 {
		return nil
	}
	_, idx, ok := evolve.ClusterColumns(m.Schema(), m.ClusterBy)
	if !ok {
		return nil
	}
	return &clusterKey{stored: m.ClusterBy, indices: idx}
}

// unsorted: f holds live rows and is not sorted by k (never, without a
// key).
func (k *clusterKey) unsorted(f *format.Fragment) bool {
	return k != nil && f.LiveRows() > 0 && !slices.Equal(f.SortedBy, k.stored)
}

// sortShare is how a sorting rewrite splits its memory budget.
type sortShare struct {
	// hold is what it holds for sorting: the run of rows read, the sort's
	// indices, the row groups being gathered and written; then the spills
	// being merged. The sources read share what is left besides the
	// fragments opened ahead.
	hold int64
	// run is the most decoded bytes of rows sorted at once.
	run int64
	// group is the decoded size of the row groups it writes:
	// ClusteredRowGroupBytes, less in a small budget.
	group int64
}

func sortShares(size, openAhead int64) sortShare {
	// Half of what the fragments opened ahead leave, and at least a
	// quarter of the budget for the sources.
	hold := max(min(size/2, size-openAhead-size/4), 1<<20)
	group := min(ClusteredRowGroupBytes, max(hold/16, 64<<10))
	// Gathering a row group holds it three times (the rows taken from
	// each batch, joined, and put in order) and the writer two more (one
	// being encoded while the next gathers); the indices take 8 bytes a
	// row, at most an eighth of a run (a run holds at most run/64 rows).
	return sortShare{hold: hold, group: group, run: max((hold-5*group)*8/9, group)}
}

// sortBin rewrites a bin into one fragment sorted by key, within mem,
// and tells how many runs it spilled.
func sortBin(ctx context.Context, b blob.Bucket, snap *table.Snapshot, bin Bin, p Policy, o Options, mem *budget, key *clusterKey) ([]format.Fragment, int, error) {
	// Sources are read a few at once: up to a quarter of the budget opened
	// ahead (table.OpenAheadBytes), between 2 and 8 fragments.
	parallel := int(min(max(mem.size/4/table.OpenAheadBytes(1), recodeParallelism), table.DefaultMemoryParallelism))
	share := sortShares(mem.size, table.OpenAheadBytes(parallel))
	release, err := mem.hold(ctx, share.hold+table.OpenAheadBytes(parallel))
	if err != nil {
		return nil, 0, err
	}
	defer release()
	s := &sorter{b: b, schema: snap.Manifest().Schema(), schemaIPC: snap.Manifest().SchemaIPC, key: key, share: share,
		targetRows: p.TargetRows, targetStored: p.TargetBytes, binStored: bin.Bytes}
	defer s.releaseRun()
	out, err := s.sort(ctx, snap, bin, parallel, o, mem)
	if err != nil {
		discard(ctx, b, s.spills)
		return nil, 0, err
	}
	return out, s.spilled, nil
}

// sort reads the bin's rows in runs of what fits (share.run of decoded
// rows, at most a 64th as many rows) and writes the bin sorted: a bin of
// one run as it is, a larger one by spilling each run sorted and merging
// the spills; in fragments of the policy's target size, each holding the
// keys after the one before.
func (s *sorter) sort(ctx context.Context, snap *table.Snapshot, bin Bin, parallel int, o Options, mem *budget) ([]format.Fragment, error) {
	runBytes := s.share.run
	_, readAhead := copyShares(mem.size, o.ReadAheadBytes)
	for rec, err := range snap.Scan(ctx, table.ScanOptions{Fragments: bin.Fragments, Parallelism: parallel, ReadAheadBytes: readAhead, BatchSize: 4096, Memory: mem}) {
		if err != nil {
			return nil, err
		}
		n := table.BatchBytes(rec)
		if len(s.run) > 0 && (s.held+n > runBytes || s.rows+rec.NumRows() > runBytes/64) {
			spill, err := s.writeRun(ctx, false)
			if err != nil {
				return nil, err
			}
			s.spills = append(s.spills, spill...)
		}
		rec.Retain()
		s.run = append(s.run, rec)
		s.held += n
		s.decoded += n
		s.rows += rec.NumRows()
	}
	last, err := s.writeRun(ctx, len(s.spills) == 0)
	if err != nil || len(s.spills) == 0 {
		return last, err
	}
	s.spills = append(s.spills, last...)
	s.spilled = len(s.spills)
	return s.mergeSpills(ctx)
}

// sorter gathers runs of a bin's rows, writes each sorted, and merges
// them.
type sorter struct {
	b         blob.Bucket
	schema    *arrow.Schema
	schemaIPC []byte
	key       *clusterKey
	share     sortShare
	spilled   int // runs spilled
	groupRows int64
	// targetRows and targetStored bound each fragment of the bin's sorted
	// rows (Policy.TargetRows, TargetBytes); the stored bytes are told by
	// the decoded ones, at the ratio of the bin's stored bytes (binStored)
	// to those it decoded to (decoded).
	targetRows, targetStored int64
	binStored, decoded       int64
	run                      []arrow.RecordBatch
	held                     int64 // the run's decoded bytes
	rows                     int64
	// spills are the runs written sorted and not merged yet: objects no
	// version references, deleted once merged (garbage collection takes
	// those a run that dies leaves).
	spills []format.Fragment
}

func (s *sorter) releaseRun() {
	fragment.ReleaseAll(s.run)
	s.run, s.held, s.rows = nil, 0, 0
}

// writeRun writes the run sorted by the key, in row groups of about
// share.group decoded bytes: as one fragment (a spill), or, when final,
// as the bin's fragments.
func (s *sorter) writeRun(ctx context.Context, final bool) ([]format.Fragment, error) {
	defer s.releaseRun()
	var order []uint64
	if s.rows > 0 {
		var err error
		if order, err = s.order(ctx); err != nil {
			return nil, err
		}
	}
	starts := make([]int64, len(s.run)+1)
	for i, rec := range s.run {
		starts[i+1] = starts[i] + rec.NumRows()
	}
	if s.groupRows == 0 {
		// Every run's row groups, and the merge's, hold as many rows as
		// the first's.
		s.groupRows = max(min(int64(fragment.RowGroupRows), s.rows*s.share.group/max(s.held, 1)), 1)
	}
	groupRows := s.groupRows
	out := &output{s: s, split: final}
	for at := int64(0); at < int64(len(order)); at += groupRows {
		rec, err := gather(ctx, s.run, starts, order[at:min(at+groupRows, int64(len(order)))])
		if err == nil {
			err = out.write(ctx, rec)
		}
		if err != nil {
			out.abort(ctx)
			return nil, err
		}
	}
	return out.close(ctx)
}

// output writes sorted row groups as fragments: one (a spill), or, split,
// a new one each time the one being written holds the target rows or
// about the target stored bytes (at least a row group), so that each
// holds the keys after the one before.
type output struct {
	s           *sorter
	split       bool
	w           *fragment.Writer
	rows, bytes int64 // of the fragment being written
	done        []format.Fragment
}

// write writes rec as a row group, and releases it. Split, a fragment
// holds at most the target rows: a row group that would pass them is cut
// there, its rest starting the next fragment.
func (o *output) write(ctx context.Context, rec arrow.RecordBatch) error {
	defer rec.Release()
	for o.split && o.rows+rec.NumRows() > o.s.targetRows {
		k := o.s.targetRows - o.rows
		head, rest := rec.NewSlice(0, k), rec.NewSlice(k, rec.NumRows())
		err := o.writeGroup(ctx, head)
		head.Release()
		if err != nil {
			rest.Release()
			return err
		}
		defer rest.Release()
		rec = rest
	}
	if rec.NumRows() == 0 {
		return nil
	}
	return o.writeGroup(ctx, rec)
}

// writeGroup writes rec as one row group, and cuts the fragment once it
// holds the target rows or about the target stored bytes.
func (o *output) writeGroup(ctx context.Context, rec arrow.RecordBatch) error {
	if o.w == nil {
		w, err := fragment.NewWriter(ctx, o.s.b, o.s.schema)
		if err != nil {
			return err
		}
		o.w = w
	}
	if err := o.w.Write(rec); err != nil {
		return err
	}
	o.rows, o.bytes = o.rows+rec.NumRows(), o.bytes+table.BatchBytes(rec)
	if err := o.w.EndRowGroup(); err != nil {
		return err
	}
	if o.split && (o.rows >= o.s.targetRows || o.stored() >= o.s.targetStored) {
		return o.cut()
	}
	return nil
}

// stored is about what the fragment being written stores: its decoded
// bytes at the bin's ratio of stored to decoded bytes (in floating point:
// two sizes of gigabytes multiplied overflow an int64).
func (o *output) stored() int64 {
	return int64(float64(o.bytes) * float64(o.s.binStored) / float64(max(o.s.decoded, 1)))
}

// cut closes the fragment being written, checking its rows.
func (o *output) cut() error {
	w, rows := o.w, o.rows
	o.w, o.rows, o.bytes = nil, 0, 0
	f, err := w.Close()
	if err != nil {
		return err
	}
	o.done = append(o.done, f)
	if f.Rows != rows {
		return fmt.Errorf("%w: %d sorted rows wrote %d", ErrRowsChanged, rows, f.Rows)
	}
	o.done[len(o.done)-1].SortedBy = slices.Clone(o.s.key.stored)
	return nil
}

// close ends the last fragment and returns them all (none when no row
// was written: a bin of no live rows leaves nothing).
func (o *output) close(ctx context.Context) ([]format.Fragment, error) {
	if o.w != nil {
		if err := o.cut(); err != nil {
			o.abort(ctx)
			return nil, err
		}
	}
	return o.done, nil
}

// abort drops what was written.
func (o *output) abort(ctx context.Context) {
	if o.w != nil {
		o.w.Abort()
		o.w = nil
	}
	discard(ctx, o.s.b, o.done)
	o.done = nil
}

// order is the run's rows in the key's order (ascending, nulls last,
// ties in the order read), as indices into the run laid end to end.
func (s *sorter) order(ctx context.Context) ([]uint64, error) {
	tbl := array.NewTableFromRecords(s.schema, s.run)
	defer tbl.Release()
	keys := make(compute.SortOptions, len(s.key.indices))
	for i, col := range s.key.indices {
		keys[i] = compute.SortKey{ColumnIndex: col, Order: compute.SortOrderAscending, NullPlacement: compute.SortNullsAtEnd}
	}
	d, err := compute.SortIndices(ctx, compute.NewDatumWithoutOwning(tbl), keys)
	if err != nil {
		return nil, fmt.Errorf("compactor: sorting by the cluster key: %w", err)
	}
	defer d.Release()
	arr := d.(*compute.ArrayDatum).MakeArray()
	defer arr.Release()
	idx, ok := arr.(*array.Uint64)
	if !ok || int64(idx.Len()) != s.rows {
		return nil, fmt.Errorf("compactor: sorting by the cluster key gave %d indices of %s for %d rows", arr.Len(), arr.DataType(), s.rows)
	}
	return slices.Clone(idx.Uint64Values()), nil
}

// gather returns the rows at positions want (indices into run laid end
// to end, starts[i] being where batch i begins) in that order.
func gather(ctx context.Context, run []arrow.RecordBatch, starts []int64, want []uint64) (arrow.RecordBatch, error) {
	g := newGathering(run, starts, want)
	cols := make([]arrow.Array, run[0].NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range cols {
		arrs := make([]arrow.Array, len(run))
		for bi, rec := range run {
			arrs[bi] = rec.Column(i)
		}
		var err error
		if cols[i], err = g.column(ctx, arrs); err != nil {
			return nil, fmt.Errorf("compactor: gathering sorted rows: %w", err)
		}
	}
	return array.NewRecordBatch(run[0].Schema(), cols, int64(len(want))), nil
}

// gathering is where the rows of a gather lie: their positions among the
// batches laid end to end (global), and, for a column whose type has no
// take over many chunks, each batch's rows (local) and where each row
// lands among them joined (place).
type gathering struct {
	global []int64
	local  [][]int64
	place  []int64
}

func newGathering(run []arrow.RecordBatch, starts []int64, want []uint64) *gathering {
	g := &gathering{global: make([]int64, len(want)), local: make([][]int64, len(run)), place: make([]int64, len(want))}
	batchOf := make([]int, len(want))
	count := make([]int, len(run))
	for i, w := range want {
		g.global[i] = int64(w)
		bi, _ := slices.BinarySearch(starts, int64(w)+1)
		batchOf[i] = bi - 1
		count[bi-1]++
	}
	// base[bi]: where batch bi's rows start among the joined rows.
	base := make([]int, len(run)+1)
	for bi := range run {
		base[bi+1] = base[bi] + count[bi]
	}
	for i, w := range want {
		bi := batchOf[i]
		g.place[i] = int64(base[bi] + len(g.local[bi]))
		g.local[bi] = append(g.local[bi], int64(w)-starts[bi])
	}
	return g
}

// column gathers one column, arrs holding it batch by batch: in one take
// over the batches as chunks where its type has one (fixed-width and
// binary types), else by taking each batch's rows, joining them, and
// putting them in order.
func (g *gathering) column(ctx context.Context, arrs []arrow.Array) (arrow.Array, error) {
	if id := arrs[0].DataType().ID(); arrow.IsPrimitive(id) || arrow.IsBaseBinary(id) {
		chunked := arrow.NewChunked(arrs[0].DataType(), arrs)
		defer chunked.Release()
		return takeChunked(ctx, chunked, g.global)
	}
	var parts []arrow.Array
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	for bi, rows := range g.local {
		if len(rows) == 0 {
			continue
		}
		part, err := takeArray(ctx, arrs[bi], rows)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part)
	}
	joined, err := array.Concatenate(parts, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	defer joined.Release()
	return takeArray(ctx, joined, g.place)
}

// indexArray is indices as an Arrow array (over their memory).
func indexArray(indices []int64) arrow.Array {
	data := array.NewData(arrow.PrimitiveTypes.Int64, len(indices), []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(indices))}, nil, 0, 0)
	defer data.Release()
	return array.NewInt64Data(data)
}

// takeArray returns arr's values at indices, in that order.
func takeArray(ctx context.Context, arr arrow.Array, indices []int64) (arrow.Array, error) {
	ix := indexArray(indices)
	defer ix.Release()
	return compute.TakeArray(ctx, arr, ix)
}

// takeChunked returns the values of c (its chunks laid end to end) at
// indices, in that order, as one array.
func takeChunked(ctx context.Context, c *arrow.Chunked, indices []int64) (arrow.Array, error) {
	ix := indexArray(indices)
	defer ix.Release()
	d, err := compute.Take(ctx, *compute.DefaultTakeOptions(), &compute.ChunkedDatum{Value: c}, compute.NewDatumWithoutOwning(ix))
	if err != nil {
		return nil, err
	}
	defer d.Release()
	switch d := d.(type) {
	case *compute.ArrayDatum:
		return d.MakeArray(), nil
	case *compute.ChunkedDatum:
		if chunks := d.Value.Chunks(); len(chunks) == 1 {
			chunks[0].Retain()
			return chunks[0], nil
		}
		return array.Concatenate(d.Value.Chunks(), memory.DefaultAllocator)
	}
	return nil, fmt.Errorf("a take over chunks gave %s", d)
}
