package compactor

import (
	"context"
	"iter"
	"math"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/table/value"
)

// A bin of more rows than one run holds is sorted as external sorts are:
// each run sorted in memory and spilled (sorter.writeRun), then the
// spills merged, ways at a time, streaming a row group of each, into one
// fragment; more spills than ways are merged in passes, each pass's
// output a spill of the next.

// ways is how many spills a merge reads at once within the sort's hold:
// reading one holds its read-ahead and tail, a row group's column chunks
// and pages, and the batches decoded and queued, about eight of its row
// groups, plus the row group being gathered.
func (s *sorter) ways() int {
	return int(max(s.share.hold/(8*s.share.group), 2))
}

// mergeSpills merges the spills into the bin's sorted fragments, and
// deletes them.
func (s *sorter) mergeSpills(ctx context.Context) ([]format.Fragment, error) {
	for {
		n := min(len(s.spills), s.ways())
		final := n == len(s.spills)
		out, err := s.merge(ctx, s.spills[:n], final)
		if err != nil {
			return nil, err
		}
		discard(ctx, s.b, s.spills[:n])
		s.spills = s.spills[n:]
		if final {
			return out, nil
		}
		s.spills = append(s.spills, out...)
	}
}

// stream is one spill being merged: its current batch and row.
type stream struct {
	next func() (arrow.RecordBatch, error, bool)
	stop func()
	rec  arrow.RecordBatch // nil once the spill is read
	row  int
	at   int // rec's place among the merge's held batches
}

// merger merges spills: the streams, and the batches the row group
// being gathered takes rows of (picks: held index << 32 | row).
type merger struct {
	s       *sorter
	streams []*stream
	held    []arrow.RecordBatch
	picks   []uint64
}

// merge writes the rows of spills, each sorted by the key, sorted by it
// (rows of equal keys keep the spills' order): as one spill, or, when
// final, as the bin's fragments.
func (s *sorter) merge(ctx context.Context, spills []format.Fragment, final bool) ([]format.Fragment, error) {
	mg := &merger{s: s}
	defer mg.close()
	if err := mg.open(ctx, spills); err != nil {
		return nil, err
	}
	out := &output{s: s, split: final}
	var err error
	for {
		min := mg.least()
		if min == nil {
			break
		}
		mg.picks = append(mg.picks, uint64(min.at)<<32|uint64(min.row))
		if min.row++; min.row == int(min.rec.NumRows()) {
			min.rec.Release()
			err = mg.advance(min)
		}
		if err == nil && int64(len(mg.picks)) == s.groupRows {
			err = mg.flush(ctx, out)
		}
		if err != nil {
			out.abort(ctx)
			return nil, err
		}
	}
	if err := mg.flush(ctx, out); err != nil {
		out.abort(ctx)
		return nil, err
	}
	return out.close(ctx)
}

// open starts reading each spill, as the fragments of a version no one
// commits.
func (mg *merger) open(ctx context.Context, spills []format.Fragment) error {
	m := &format.Manifest{SchemaIPC: mg.s.schemaIPC, Fragments: make([]format.Fragment, len(spills))}
	for i, f := range spills {
		f.ID = uint64(i + 1)
		m.Fragments[i] = f
	}
	if err := format.Refresh(m); err != nil {
		return err
	}
	snap := table.NewSnapshot(mg.s.b, m)
	for _, f := range m.Fragments {
		next, stop := iter.Pull2(snap.Scan(ctx, table.ScanOptions{Fragments: []uint64{f.ID}, Parallelism: 1,
			ReadAheadBytes: mg.s.share.group, BatchSize: int(mg.s.groupRows)}))
		st := &stream{next: next, stop: stop}
		mg.streams = append(mg.streams, st)
		if err := mg.advance(st); err != nil {
			return err
		}
	}
	return nil
}

// advance moves st to its spill's next batch (nil at its end).
func (mg *merger) advance(st *stream) error {
	for {
		rec, err, ok := st.next()
		if !ok {
			st.rec = nil
			return nil
		}
		if err != nil {
			st.rec = nil
			return err
		}
		if rec.NumRows() == 0 {
			continue
		}
		rec.Retain()
		rec.Retain()
		st.rec, st.row, st.at = rec, 0, len(mg.held)
		mg.held = append(mg.held, rec)
		return nil
	}
}

// least is the stream whose current row comes first (the first such
// stream on a tie), nil when all are read.
func (mg *merger) least() *stream {
	var min *stream
	for _, st := range mg.streams {
		if st.rec != nil && (min == nil || mg.s.compare(st, min) < 0) {
			min = st
		}
	}
	return min
}

// flush writes the rows picked as one row group of out, and lets go of
// the batches no stream is on.
func (mg *merger) flush(ctx context.Context, out *output) error {
	if len(mg.picks) == 0 {
		return nil
	}
	starts := make([]int64, len(mg.held)+1)
	for i, rec := range mg.held {
		starts[i+1] = starts[i] + rec.NumRows()
	}
	want := make([]uint64, len(mg.picks))
	for i, p := range mg.picks {
		want[i] = uint64(starts[p>>32]) + p&math.MaxUint32
	}
	rec, err := gather(ctx, mg.held, starts, want)
	if err == nil {
		err = out.write(ctx, rec)
	}
	mg.picks = mg.picks[:0]
	kept := make([]arrow.RecordBatch, 0, len(mg.streams))
	for _, st := range mg.streams {
		if st.rec != nil {
			st.rec.Retain()
			st.at = len(kept)
			kept = append(kept, st.rec)
		}
	}
	fragment.ReleaseAll(mg.held)
	mg.held = kept
	return err
}

// close stops the streams and lets go of what they hold.
func (mg *merger) close() {
	for _, st := range mg.streams {
		st.stop()
		if st.rec != nil {
			st.rec.Release()
		}
	}
	fragment.ReleaseAll(mg.held)
}

// compare orders the current rows of two streams by the key: each
// column ascending, NaN after numbers, nulls last (as the runs were
// sorted).
func (s *sorter) compare(a, b *stream) int {
	for _, col := range s.key.indices {
		if c := compareAt(a.rec.Column(col), a.row, b.rec.Column(col), b.row); c != 0 {
			return c
		}
	}
	return 0
}

func compareAt(a arrow.Array, i int, b arrow.Array, j int) int {
	an, bn := a.IsNull(i), b.IsNull(j)
	switch {
	case an || bn:
		return boolOrder(an, bn)
	}
	va, _ := format.ValueAt(a, i)
	vb, _ := format.ValueAt(b, j)
	if va.Kind == value.KindFloat {
		if an, bn := math.IsNaN(va.F), math.IsNaN(vb.F); an || bn {
			return boolOrder(an, bn)
		}
	}
	return value.Compare(va, vb)
}

// boolOrder orders false before true: a null or a NaN (true) after a
// value.
func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
