package table

import (
	"context"

	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// CopyHoldBytes is what CopyFragments with a Memory budget holds besides
// what it reserves: the row group it is joining (rowGroupBytes, 0 meaning
// the default 64 MiB) and one source to decode opened ahead of its
// reservation (read whole up to 4 MiB, else its tail). A caller counts it
// once per copy.
func CopyHoldBytes(rowGroupBytes int64) int64 {
	if rowGroupBytes <= 0 {
		rowGroupBytes = copyRowGroupBytes
	}
	return rowGroupBytes + OpenAheadBytes(1)
}

// copyWithin is CopyFragments of frags with a Memory budget: in order,
// each source reserves its weight before it is read — a source to decode
// is opened first, its footer giving its weight — and gives it back once
// w has taken its row groups.
func (s *Snapshot) copyWithin(ctx context.Context, p *scanPlan, frags []*format.Fragment, mem Memory, w *pageCopier) error {
	// A source to decode is read as recodeRowGroups reads it: every
	// column, a row group a batch, one row group at a time.
	rp, err := s.plan(ScanOptions{Parallelism: 1, BatchSize: fragment.RowGroupRows, ReadAheadBytes: p.opts.ReadAheadBytes})
	if err != nil {
		return err
	}
	readAhead := p.opts.ReadAheadBytes
	toDecode := make([]*opened, len(frags))
	reserve := func(ctx context.Context, i int) (format.Reservation, error) {
		f := frags[i]
		var o *opened
		weight := copyWeight(f, readAhead)
		if !s.copyable(f) {
			if o, err = rp.open(ctx, f, false); err != nil {
				return format.Reservation{}, err
			}
			weight = rp.weight(o) + recodeHold(o)
		}
		if err := mem.Reserve(ctx, weight); err != nil {
			if o != nil {
				o.close()
			}
			return format.Reservation{}, err
		}
		toDecode[i] = o
		return format.Reservation{Used: func() {
			if o != nil {
				o.close()
			}
			mem.Release(weight)
		}}, nil
	}
	return format.InOrder(ctx, len(frags), p.opts.Parallelism, reserve,
		func(ctx context.Context, i int, emit func(*sourceRowGroup) bool) error {
			if o := toDecode[i]; o != nil {
				toDecode[i] = nil
				return s.recodeOpened(ctx, rp, o, emit)
			}
			return readSourceRowGroups(ctx, s.b, frags[i], w.props, readAhead, emit)
		},
		w.add, func(*sourceRowGroup) {})
}

// copyWeight is what copying the pages of source f holds until the copy
// has taken its row groups: its object, read whole (up to 4 MiB), or, read
// by ranges, the column chunks fetched ahead (up to readAhead) and its
// tail, and up to three of its row groups copied out of them (one being
// read, two on their way; a row group counted at its share of the
// object's bytes by rows); and a page decompressed while it is checked.
func copyWeight(f *format.Fragment, readAhead int64) int64 {
	const checking = 2 * pageBytes
	if f.Bytes <= fragment.WholeReadLimit {
		return f.Bytes + checking
	}
	rows := max(f.Rows, 1)
	group := f.Bytes * min(rows, fragment.RowGroupRows) / rows
	return min(readAhead, f.Bytes) + format.TailBytes + min(3*group, f.Bytes) + checking
}

// recodeHold is what recoding an opened fragment holds besides its scan's
// weight: the live rows of a row group gathered (its decoded bytes), and
// the row group encoded again in memory (its decoded bytes once more, for
// the encoder's pages, and its compressed column chunks).
func recodeHold(o *opened) int64 {
	var most int64
	for rg := range o.md.NumRowGroups() {
		rgmd := o.md.RowGroup(rg)
		var decoded, compressed int64
		for leaf := range o.md.NumColumns() {
			cc, err := rgmd.ColumnChunk(leaf)
			if err != nil {
				continue
			}
			decoded += max(cc.TotalUncompressedSize(), 8*cc.NumValues())
			compressed += cc.TotalCompressedSize()
		}
		most = max(most, 2*decoded+compressed)
	}
	return most
}
