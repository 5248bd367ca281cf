package table

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/table/value"
)

// ErrNotCopyable: fragments that CopyFragments cannot merge page by page
// (a deletion vector, missing statistics, a dictionary page, another codec,
// another Parquet schema). Nothing was committed; rewrite them by decoding.
var ErrNotCopyable = errors.New("table: fragments cannot be merged by copying their pages")

// copyRowGroupBytes bounds the column chunks CopyFragments holds to write
// one row group (with RowGroupRows bounding its rows).
const copyRowGroupBytes = 64 << 20

// CopyOptions tune CopyFragments; zero values mean the Scan defaults.
type CopyOptions struct {
	Parallelism    int   // fragments read at once
	ReadAheadBytes int64 // bytes of fragment objects read at once (a larger one alone)
	// Memory, when set, is a budget the copy reserves from, for each
	// source in order and before reading it, what reading it holds
	// (CopyWeight; a source to decode, its footer read first), and gives
	// back once the copy has taken its row groups. What the copy then
	// holds of them, the row group it is joining, is bounded by
	// RowGroupBytes (default 64 MiB), which the caller counts besides.
	Memory        Memory
	RowGroupBytes int64
}

// CopyFragments writes the live rows of fragments ids of the snapshot —
// in manifest order, the order Scan yields them — as one new fragment, by
// copying the compressed pages of their column chunks instead of decoding
// and encoding them again: row groups of the sources are laid end to end,
// small ones joined into row groups of up to RowGroupRows rows whose column
// chunks are the sources' pages one after another. Every page is read back
// (its header parsed, its data decompressed, its values counted against the
// footer) before it is copied, so a damaged source fails the copy as it
// would fail a decoding rewrite, with a *CorruptError naming it.
//
// A fragment with a deletion vector, or without manifest statistics, is
// decoded and encoded again (its live rows, RowGroupRows at a time, in
// memory: recodeRowGroups) and its row groups join the others. Sources must share one
// Parquet and Arrow schema, with no dictionary page and no codec other
// than the one fragments are written with; otherwise the result is
// ErrNotCopyable, found once the footers are read (the partial object is
// left to garbage collection, like an aborted fragment's), and the caller
// rewrites the bin by decoding it.
//
// The result's Parquet statistics (per row group and column chunk) and
// manifest statistics are merged from the sources', and left out when a
// source lacks them: never narrower than the rows.
func (s *Snapshot) CopyFragments(ctx context.Context, ids []uint64, opts CopyOptions) (format.Fragment, error) {
	p, err := s.plan(ScanOptions{Fragments: ids, Parallelism: opts.Parallelism, ReadAheadBytes: opts.ReadAheadBytes})
	if err != nil {
		return format.Fragment{}, err
	}
	frags := p.fragments()
	if len(frags) == 0 {
		return format.Fragment{}, fmt.Errorf("%w: no live rows", ErrNotCopyable)
	}
	w := newPageCopier(ctx, s.b, format.NewFragmentKey())
	if opts.RowGroupBytes > 0 {
		w.maxBytes = opts.RowGroupBytes
	}
	if opts.Memory != nil {
		err = s.copyWithin(ctx, p, frags, opts.Memory, w)
	} else {
		err = format.ReadInOrder(ctx, frags, p.opts.Parallelism, p.opts.ReadAheadBytes,
			func(ctx context.Context, f *format.Fragment, emit func(*sourceRowGroup) bool) error {
				if !s.copyable(f) {
					return s.recodeRowGroups(ctx, f, emit)
				}
				return readSourceRowGroups(ctx, s.b, f, w.props, p.opts.ReadAheadBytes, emit)
			},
			w.add, func(*sourceRowGroup) {})
	}
	if err == nil {
		err = w.err
	}
	if err != nil {
		w.abort()
		return format.Fragment{}, err
	}
	out, err := w.close()
	if err != nil {
		return format.Fragment{}, err
	}
	out.Columns = mergeColumnStats(w.stats)
	out.SchemaID = evolve.SchemaID(s.m.Schema())
	var rows int64
	for _, f := range frags {
		rows += f.LiveRows()
	}
	if out.Rows != rows {
		return format.Fragment{}, fmt.Errorf("table: copy into %s: wrote %d rows of %d", out.Key, out.Rows, rows)
	}
	return out, nil
}

// sourceRowGroup is one row group of a source fragment, its column chunks
// read and checked.
type sourceRowGroup struct {
	key    string
	file   *metadata.FileMetaData
	md     *metadata.RowGroupMetaData
	chunks [][]byte // by leaf column: the chunk's pages, headers included
	pages  []map[parquet.Encoding]int32
	bytes  int64
	// stats: the manifest statistics of the rows of this source that
	// this row group is the first of (nil for the others).
	stats *sourceStats
}

type sourceStats struct {
	rows    int64
	columns []format.ColumnStats
}

// copyable: f's pages can be copied as they are — written under the
// table's schema as it is (a fragment from before a schema change is
// decoded, and read as the current schema reads it), no deletion vector,
// and manifest statistics for every column of the table.
func (s *Snapshot) copyable(f *format.Fragment) bool {
	schema := s.m.Schema()
	ok := f.SchemaID == evolve.SchemaID(schema) && f.Deletion == nil && len(f.Columns) == schema.NumFields()
	for i := 0; ok && i < len(f.Columns); i++ {
		ok = f.Columns[i].Name == evolve.StoredName(schema.Field(i))
	}
	return ok
}

// indices returns 0, 1, …, n-1.
func indices(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// readSourceRowGroups reads fragment f's row groups and hands each to emit
// (false: stop): a small fragment with one GET, a large one by ranges (the
// footer, then its column chunks fetched ahead).
func readSourceRowGroups(ctx context.Context, b blob.Bucket, f *format.Fragment, props *parquet.WriterProperties, readAhead int64, emit func(*sourceRowGroup) bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = format.Corrupt(f.Key, "parquet data is damaged", fmt.Errorf("%v", r))
		}
		if errors.Is(err, blob.ErrNotFound) && !errors.Is(err, format.ErrMissingData) {
			err = &format.MissingDataError{Keys: []string{f.Key}, Detail: fmt.Sprintf("fragment %d", f.ID), Err: err}
		}
	}()
	src, whole, pre, err := fragment.Fetch(ctx, b, f, readAhead, false)
	if err != nil {
		return err
	}
	if pre != nil {
		defer pre.Close()
	}
	pf, err := file.NewParquetReader(src, file.WithReadProps(parquet.NewReaderProperties(memory.DefaultAllocator)))
	if err != nil {
		return format.Corrupt(f.Key, "not a readable parquet file", err)
	}
	md := pf.MetaData()
	if err := fragment.CheckFooter(md); err != nil {
		return format.Corrupt(f.Key, "parquet footer is damaged", err)
	}
	if md.NumRows != f.Rows {
		return format.Corrupt(f.Key, fmt.Sprintf("holds %d rows, the manifest says %d", md.NumRows, f.Rows), nil)
	}
	return emitRowGroups(f, md, src, whole, pre, props, emit)
}

// emitRowGroups reads the row groups of f's object, its footer md read
// from src (whole: the object held in memory; pre: fetching its column
// chunks ahead), checks them, and hands each to emit (false: stop).
func emitRowGroups(f *format.Fragment, md *metadata.FileMetaData, src parquet.ReaderAtSeeker, whole []byte, pre *format.Prefetcher, props *parquet.WriterProperties, emit func(*sourceRowGroup) bool) (err error) {
	leaves := indices(md.NumColumns())
	ranges := fragment.ChunkRanges(md, indices(md.NumRowGroups()), leaves)
	if pre != nil {
		pre.Prefetch(ranges)
	}
	for rg := range md.NumRowGroups() {
		u := &sourceRowGroup{key: f.Key, file: md, md: md.RowGroup(rg)}
		if rg == 0 {
			u.stats = &sourceStats{rows: f.Rows, columns: f.Columns}
		}
		// Pages are checked where they are held: in the object read
		// whole, or in the chunks read by ranges (each handed out once).
		pages, held := src, &heldChunks{size: f.Bytes}
		if pre != nil {
			pages = held
		}
		for c := range leaves {
			col, err := u.md.ColumnChunk(c)
			if err != nil {
				return format.Corrupt(f.Key, fmt.Sprintf("row group %d column %d", rg, c), err)
			}
			if col.HasDictionaryPage() || col.Compression() != props.CompressionFor(col.PathInSchema().String()) || col.CryptoMetadata() != nil {
				return fmt.Errorf("%w: %s column %s is dictionary encoded, encrypted or compressed with %s", ErrNotCopyable, f.Key, col.PathInSchema(), col.Compression())
			}
			// A flat column holds a value per row; its statistics are
			// decoded here, where a damaged footer is this source's error.
			if md.Schema.Column(c).MaxRepetitionLevel() == 0 && col.NumValues() != u.md.NumRows() {
				return format.Corrupt(f.Key, fmt.Sprintf("row group %d column %s holds %d values for %d rows", rg, col.PathInSchema(), col.NumValues(), u.md.NumRows()), nil)
			}
			if _, err := col.Statistics(); err != nil {
				return format.Corrupt(f.Key, fmt.Sprintf("row group %d column %s statistics", rg, col.PathInSchema()), err)
			}
			r := ranges[rg*len(leaves)+c]
			if r[0] < 4 || r[1] < 0 || r[0]+r[1] > f.Bytes {
				return format.Corrupt(f.Key, fmt.Sprintf("row group %d column %d lies outside the object", rg, c), nil)
			}
			var chunk []byte
			if whole != nil {
				chunk = whole[r[0] : r[0]+r[1]]
			} else {
				chunk = make([]byte, r[1])
				if _, err := src.ReadAt(chunk, r[0]); err != nil && !(err == io.EOF && r[0]+r[1] == f.Bytes) {
					return err
				}
				held.add(r[0], chunk)
			}
			u.chunks = append(u.chunks, chunk)
			u.bytes += r[1]
		}
		if u.pages, err = checkPages(md, rg, pages); err != nil {
			return format.Corrupt(f.Key, fmt.Sprintf("row group %d", rg), err)
		}
		if !emit(u) {
			return nil
		}
	}
	return nil
}

// checkPages reads every page of row group rg's column chunks from src:
// headers parse, data decompresses to the size its header gives, and the
// values add up to the chunk's count. It returns the data pages counted by
// encoding, per column.
func checkPages(md *metadata.FileMetaData, rg int, src parquet.ReaderAtSeeker) ([]map[parquet.Encoding]int32, error) {
	r, err := file.NewParquetReader(src, file.WithMetadata(md), file.WithReadProps(parquet.NewReaderProperties(memory.DefaultAllocator)))
	if err != nil {
		return nil, err
	}
	rgr := r.RowGroup(rg)
	out := make([]map[parquet.Encoding]int32, md.NumColumns())
	for c := range out {
		col, err := rgr.MetaData().ColumnChunk(c)
		if err != nil {
			return nil, err
		}
		pr, err := rgr.GetColumnPageReader(c)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", col.PathInSchema(), err)
		}
		out[c] = map[parquet.Encoding]int32{}
		var values int64
		for pr.Next() {
			pg := pr.Page()
			switch pg.Type() {
			case file.PageTypeDataPage, file.PageTypeDataPageV2:
				values += int64(pg.NumValues())
				out[c][parquet.Encoding(pg.Encoding())]++
			default:
				pr.Close()
				return nil, fmt.Errorf("column %s: unexpected %v page", col.PathInSchema(), pg.Type())
			}
		}
		err = pr.Err()
		pr.Close()
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", col.PathInSchema(), err)
		}
		if values != col.NumValues() {
			return nil, fmt.Errorf("column %s: pages hold %d values, the footer says %d", col.PathInSchema(), values, col.NumValues())
		}
	}
	return out, nil
}

// heldChunks serves the Parquet reader's reads of column chunks held in
// memory, at their offsets in the object.
type heldChunks struct {
	size   int64
	offs   []int64
	chunks [][]byte
	pos    int64
}

func (h *heldChunks) add(off int64, chunk []byte) {
	h.offs = append(h.offs, off)
	h.chunks = append(h.chunks, chunk)
}

func (h *heldChunks) ReadAt(p []byte, off int64) (int, error) {
	for i, start := range h.offs {
		if off >= start && off+int64(len(p)) <= start+int64(len(h.chunks[i])) {
			return copy(p, h.chunks[i][off-start:]), nil
		}
	}
	return 0, fmt.Errorf("table: read of %d bytes at %d outside the column chunks held", len(p), off)
}

func (h *heldChunks) Read(p []byte) (int, error) {
	n, err := h.ReadAt(p, h.pos)
	h.pos += int64(n)
	return n, err
}

func (h *heldChunks) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		h.pos = offset
	case io.SeekCurrent:
		h.pos += offset
	case io.SeekEnd:
		h.pos = h.size + offset
	}
	return h.pos, nil
}

// pageCopier writes a fragment of the row groups it is handed, joining
// small ones, their column chunks copied as they are.
type pageCopier struct {
	key     string
	up      *fragment.Upload
	props   *parquet.WriterProperties
	meta    *metadata.FileMetaDataBuilder
	first   *sourceRowGroup // the layout every source must share
	pending []*sourceRowGroup
	rows    int64
	bytes   int64
	groups  int
	stats   []sourceStats
	// maxBytes bounds the pending row groups' column chunks (but one
	// row group of a source, however large, is joined alone).
	maxBytes int64
	err      error
	// omit names footer key-value pairs of the sources that the fragment
	// leaves out (and that may differ between them); kv is what it keeps.
	omit []string
	kv   metadata.KeyValueMetadata
}

// newPageCopier starts the object; its first bytes are written at once,
// which returns once the upload has begun reading them.
func newPageCopier(ctx context.Context, b blob.Bucket, key string) *pageCopier {
	w := &pageCopier{key: key, up: fragment.StartUpload(ctx, b, key), props: fragment.Props(), maxBytes: copyRowGroupBytes}
	if _, err := w.up.Write([]byte("PAR1")); err != nil {
		w.err = fmt.Errorf("table: write fragment %s: %w", w.key, err)
	}
	return w
}

// add takes a source row group; false stops the copy (w.err says why).
// A panic on what a source's footer holds is that source's CorruptError.
func (w *pageCopier) add(u *sourceRowGroup) (ok bool) {
	if w.err != nil {
		return false
	}
	defer func() {
		if r := recover(); r != nil {
			w.err, ok = format.Corrupt(u.key, "parquet footer is damaged", fmt.Errorf("%v", r)), false
		}
	}()
	if u.stats != nil {
		w.stats = append(w.stats, *u.stats)
	}
	if u.md == nil {
		return true
	}
	kv := kvWithout(u.file.KeyValueMetadata(), w.omit)
	if w.first == nil {
		w.first, w.kv = u, kv
		w.meta = metadata.NewFileMetadataBuilder(u.file.Schema, w.props, slices.Clone(kv))
	} else if !u.file.Schema.Equals(w.first.file.Schema) || !kv.Equals(w.kv) {
		w.err = fmt.Errorf("%w: %s and %s were written with different schemas", ErrNotCopyable, w.first.key, u.key)
		return false
	}
	if len(w.pending) > 0 && (w.rows+u.md.NumRows() > fragment.RowGroupRows || w.bytes+u.bytes > w.maxBytes) {
		if w.err = w.flush(); w.err != nil {
			return false
		}
	}
	w.pending = append(w.pending, u)
	w.rows += u.md.NumRows()
	w.bytes += u.bytes
	return true
}

// kvWithout returns kv without the pairs whose keys are in omit.
func kvWithout(kv metadata.KeyValueMetadata, omit []string) metadata.KeyValueMetadata {
	if len(omit) == 0 {
		return kv
	}
	out, vals := metadata.NewKeyValueMetadata(), kv.Values()
	for i, k := range kv.Keys() {
		if !slices.Contains(omit, k) {
			_ = out.Append(k, vals[i])
		}
	}
	return out
}

// flush writes the pending row groups as one.
func (w *pageCopier) flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	if w.groups > 1<<15-1 {
		return fmt.Errorf("table: write fragment %s: more than %d row groups", w.key, 1<<15-1)
	}
	rgb := w.meta.AppendRowGroup()
	for c := range w.first.chunks {
		cb := rgb.NextColumnChunk()
		start := w.up.N
		var values, uncompressed int64
		encodings := map[parquet.Encoding]int32{}
		cols := make([]*metadata.ColumnChunkMetaData, len(w.pending))
		for i, u := range w.pending {
			col, err := u.md.ColumnChunk(c)
			if err != nil {
				return format.Corrupt(u.key, fmt.Sprintf("column %d", c), err)
			}
			cols[i] = col
			if _, err := w.up.Write(u.chunks[c]); err != nil {
				return fmt.Errorf("table: write fragment %s: %w", w.key, err)
			}
			values += col.NumValues()
			uncompressed += col.TotalUncompressedSize()
			for enc, n := range u.pages[c] {
				encodings[enc] += n
			}
		}
		if st, ok := mergeChunkStats(cols); ok {
			cb.SetStats(st)
		}
		err := cb.Finish(metadata.ChunkMetaInfo{
			NumValues: values, IndexPageOffset: -1, DataPageOffset: start,
			CompressedSize: w.up.N - start, UncompressedSize: uncompressed,
		}, false, false, metadata.EncodingStats{DataEncodingStats: encodings})
		if err != nil {
			return fmt.Errorf("table: write fragment %s: %w", w.key, err)
		}
	}
	rgb.SetNumRows(int(w.rows))
	if err := rgb.Finish(0, int16(w.groups)); err != nil {
		return fmt.Errorf("table: write fragment %s: %w", w.key, err)
	}
	w.groups++
	w.pending, w.rows, w.bytes = nil, 0, 0
	return nil
}

// close writes the last row group and the footer and finishes the upload.
func (w *pageCopier) close() (_ format.Fragment, err error) {
	defer func() {
		if r := recover(); r != nil {
			_ = w.up.Finish(errors.New("fragment aborted"))
			err = fmt.Errorf("table: write fragment %s: %v", w.key, r)
		}
	}()
	err = w.flush()
	var md *metadata.FileMetaData
	if err == nil {
		md, err = w.meta.Finish()
	}
	if err == nil {
		err = fragment.WriteFooter(w.up, md)
	}
	if err == nil {
		err = w.up.Finish(nil)
	} else {
		_ = w.up.Finish(err)
	}
	if err != nil {
		return format.Fragment{}, fmt.Errorf("table: write fragment %s: %w", w.key, err)
	}
	f := format.Fragment{Key: w.key, Rows: md.NumRows, Bytes: w.up.N, Created: time.Now().UTC()}
	f.Chunks, f.Footer = fragment.LayOut(md, w.up)
	return f, nil
}

func (w *pageCopier) abort() { _ = w.up.Finish(errors.New("fragment aborted")) }

// mergeChunkStats merges column chunks' statistics; false when one lacks
// them. Min and max are left out when a chunk holding values has none
// (or only one of them: minMaxKnown).
func mergeChunkStats(cols []*metadata.ColumnChunkMetaData) (metadata.EncodedStatistics, bool) {
	var acc metadata.TypedStatistics
	minMax := true
	for _, col := range cols {
		st, err := col.Statistics()
		if err != nil || st == nil || !st.HasNullCount() {
			return metadata.EncodedStatistics{}, false
		}
		if !minMaxKnown(st) && st.NumValues() > 0 {
			minMax = false
		}
		if acc == nil {
			acc = metadata.NewStatistics(st.Descr(), memory.DefaultAllocator)
		}
		acc.Merge(st)
	}
	enc, err := acc.Encode()
	if err != nil {
		return metadata.EncodedStatistics{}, false
	}
	if !minMax {
		enc.HasMin, enc.HasMax, enc.Min, enc.Max = false, false, nil, nil
	}
	enc.HasDistinctCount, enc.DistinctCount = false, 0
	return enc, true
}

// mergeColumnStats merges the sources' manifest statistics: nulls add
// up; min and max are known when every source holding a value knows its
// own.
func mergeColumnStats(srcs []sourceStats) []format.ColumnStats {
	out := make([]format.ColumnStats, len(srcs[0].columns))
	for i := range out {
		out[i].Name = srcs[0].columns[i].Name
		known := true
		for _, src := range srcs {
			c := src.columns[i]
			out[i].Nulls += c.Nulls
			if c.Min == nil || c.Max == nil {
				known = known && c.Nulls >= src.rows
				continue
			}
			if out[i].Min == nil || value.Compare(*c.Min, *out[i].Min) < 0 {
				v := *c.Min
				out[i].Min = &v
			}
			if out[i].Max == nil || value.Compare(*c.Max, *out[i].Max) > 0 {
				v := *c.Max
				out[i].Max = &v
			}
		}
		if !known {
			out[i].Min, out[i].Max = nil, nil
		}
	}
	return out
}
