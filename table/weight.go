package table

import (
	"github.com/stratadb/strata/table/format"
)

// weight is what reading an opened fragment holds at most, and so what a
// scan with a Memory budget reserves for it before decoding it:
//
//	fetched + parallel·max_r(chunks(r) + pages(r) + 2·batch(r))
//	        + queued·max_r batch(r) + 4·deleted
//
// over the row groups r the scan reads, summing over the Parquet leaves
// it reads:
//
//   - fetched: the object, held whole (up to 4 MiB) or streamed whole;
//     or, read by ranges, the read-ahead of fetched column chunks not yet
//     decoded and the tail kept for the footer;
//   - chunks(r): the column chunks a row group's reader holds — each
//     whole when read by ranges (the reader asks for a chunk in one
//     read), else a buffer of up to 1 MiB over the bytes in memory;
//   - pages(r): a decompressed page per column: at least a batch's share
//     of the chunk, at least a page (pageBytes), at most the chunk;
//   - batch(r): a batch's decoded bytes, the row group's decoded bytes
//     times BatchSize over its rows (all of them when it has fewer): one
//     batch being built and its filtered copy per row group decoded at
//     once, and up to queued batches on their way to the caller (two per
//     row group decoded at once, two in the scan's queue and the one the
//     caller holds, no more than the fragment has);
//   - a leaf's decoded bytes are its chunk's uncompressed bytes (the
//     plain encoding: Strata writes no dictionaries), at least 8 bytes a
//     value (a null takes its width in Arrow);
//   - deleted: the fragment's deletion vector, 4 bytes a deleted row.
//
// A single large value counts whole when its row group has no more rows
// than a batch (a WAL entry or a generation of one append, say): its
// page, its chunk and its batch are each the value. In a row group of
// many rows, values are counted at the row group's average size.
func (p *scanPlan) weight(o *opened) int64 {
	fetched := o.f.Bytes
	inMemory := o.pre == nil || o.streamLater
	if !inMemory {
		fetched = min(p.opts.ReadAheadBytes, o.f.Bytes) + format.TailBytes
	}
	b := int64(p.opts.BatchSize)
	var perRowGroup, maxBatch, batches int64
	for _, rg := range o.rgs {
		rgmd := o.md.RowGroup(rg)
		rows := max(rgmd.NumRows(), 1)
		var chunks, pages, batch int64
		for _, leaf := range o.lay.leaves {
			cc, err := rgmd.ColumnChunk(leaf)
			if err != nil {
				continue
			}
			comp := cc.TotalCompressedSize()
			decoded := max(cc.TotalUncompressedSize(), 8*cc.NumValues())
			share := decoded
			if rows > b {
				share = decoded * b / rows
			}
			if inMemory {
				chunks += min(comp, 1<<20)
			} else {
				chunks += comp
			}
			pages += min(decoded, max(pageBytes, share))
			batch += share
		}
		perRowGroup = max(perRowGroup, chunks+pages+2*batch)
		maxBatch = max(maxBatch, batch)
		batches += (rows + b - 1) / b
	}
	queued := min(batches, int64(2*o.parallel+3))
	var deleted int64
	if o.f.Deletion != nil {
		deleted = 4 * o.f.Deletion.Count
	}
	return fetched + int64(o.parallel)*perRowGroup + queued*maxBatch + deleted
}
