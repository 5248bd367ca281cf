package fragment

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/internal/ipcguard"
	"github.com/stratadb/strata/table/format"
)

// Open opens a fragment's Parquet reader over src (see
// Fetch), which the caller closes with CloseSource when done;
// pre, when not nil, is the prefetcher src reads through.
func Open(ctx context.Context, b blob.Bucket, f *format.Fragment, mem memory.Allocator, batchSize int, readAhead int64, whole bool) (_ *pqarrow.FileReader, src parquet.ReaderAtSeeker, _ *format.Prefetcher, err error) {
	src, _, pre, err := Fetch(ctx, b, f, readAhead, whole)
	if err != nil {
		return nil, nil, nil, err
	}
	return openSource(f, src, pre, mem, batchSize)
}

// OpenSpans is Open of the bytes a read needs, where f's entry says they
// lie (format.Fragment.Spans): its footer (the range footer) and the
// spans holding its column chunks are asked for at once, in one round
// trip, through a prefetcher; anything else the reader asks for is read
// when it does.
//
// known, when not nil, is the object's footer as read before: it is not
// asked for again.
func OpenSpans(ctx context.Context, b blob.Bucket, f *format.Fragment, mem memory.Allocator, batchSize int, readAhead int64, spans []format.Span, footer [2]int64, known []byte) (*pqarrow.FileReader, parquet.ReaderAtSeeker, *format.Prefetcher, error) {
	var pre *format.Prefetcher
	if known != nil {
		pre = format.NewPrefetcherKnown(ctx, b, f.Key, f.Bytes, readAhead, known)
	} else {
		pre = format.NewPrefetcherTail(ctx, b, f.Key, f.Bytes, readAhead, footer[1])
	}
	pre.PrefetchSpans(spans)
	return openSource(f, pre, pre, mem, batchSize)
}

// openSource opens the Parquet reader of fragment f over src.
func openSource(f *format.Fragment, src parquet.ReaderAtSeeker, pre *format.Prefetcher, mem memory.Allocator, batchSize int) (_ *pqarrow.FileReader, _ parquet.ReaderAtSeeker, _ *format.Prefetcher, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = format.Corrupt(f.Key, "parquet footer is damaged", fmt.Errorf("%v", r))
		}
		if err != nil {
			err = ReadFailure(src, err)
			CloseSource(src)
		}
	}()
	fr, err := NewReader(src, nil, mem, batchSize)
	if err != nil {
		return nil, nil, nil, format.Corrupt(f.Key, "not a readable parquet file", err)
	}
	return fr, src, pre, nil
}

// Fetch fetches fragment f for reading (src): the whole object
// in memory (data) when it is small — one GET, its size checked against
// the manifest; a stream of the whole object when whole is set (every
// column chunk will be read) and it fits in readAhead — ranged GETs of
// about streamPart at once, read as they arrive; otherwise through a
// prefetcher (pre) that serves ranged reads. The caller closes a stream
// or a prefetcher with CloseSource.
func Fetch(ctx context.Context, b blob.Bucket, f *format.Fragment, readAhead int64, whole bool) (src parquet.ReaderAtSeeker, data []byte, pre *format.Prefetcher, err error) {
	switch {
	case f.Bytes <= WholeReadLimit:
		if data, err = b.Get(ctx, f.Key); err != nil {
			return nil, nil, nil, err
		}
		if int64(len(data)) != f.Bytes {
			return nil, nil, nil, wrongSize(f, int64(len(data)))
		}
	case whole && f.Bytes <= readAhead:
		return newStream(ctx, b, f), nil, nil, nil
	default:
		pre = format.NewPrefetcher(ctx, b, f.Key, f.Bytes, readAhead)
		return pre, nil, pre, nil
	}
	return bytes.NewReader(data), data, nil, nil
}

// wrongSize is the error of fragment f's object found to be size bytes.
func wrongSize(f *format.Fragment, size int64) error {
	return format.Corrupt(f.Key, fmt.Sprintf("object is %d bytes, the manifest says %d", size, f.Bytes), nil)
}

// CloseSource ends the requests still in flight for src, a fragment's
// source from Source.
func CloseSource(src parquet.ReaderAtSeeker) {
	switch s := src.(type) {
	case *format.Prefetcher:
		s.Close()
	case *Stream:
		s.Close()
	}
}

// ReadFailure is err, or the failure of src's requests when src is a
// stream and one failed: the Parquet reader's error for bytes that never
// came (a page it calls damaged, say) is not the object's.
func ReadFailure(src parquet.ReaderAtSeeker, err error) error {
	if s, ok := src.(*Stream); ok && err != nil {
		if ferr := s.failure(); ferr != nil {
			return ferr
		}
	}
	return err
}

// NewReader opens src's Parquet file for reading as Arrow, with its
// footer md when given (read from src otherwise; then its column chunks
// are checked to lie within the file). Read by ranges (a prefetcher),
// each column chunk is a request of its own: the columns of a row group
// are read at once, so a scan pays one round trip per row group rather
// than one per column chunk.
func NewReader(src parquet.ReaderAtSeeker, md *metadata.FileMetaData, mem memory.Allocator, batchSize int) (*pqarrow.FileReader, error) {
	props := parquet.NewReaderProperties(mem) // unbuffered: one ReadAt per column chunk
	switch src.(type) {
	case *bytes.Reader, *Stream:
		// In memory or streamed: pages are read through a small buffer
		// rather than each column chunk copied whole into one of its own.
		props.BufferedStreamEnabled, props.BufferSize = true, 1<<20
	}
	opts := []file.ReadOption{file.WithReadProps(props)}
	if md != nil {
		opts = append(opts, file.WithMetadata(md))
	}
	pf, err := file.NewParquetReader(src, opts...)
	if err != nil {
		return nil, err
	}
	if md == nil { // a footer handed in was checked when it was read
		if err := CheckFooter(pf.MetaData()); err != nil {
			return nil, err
		}
	}
	// Never the reader's parallel mode: it decodes each column in a
	// goroutine of its own, where a damaged page's panic kills the
	// process. A RowGroupReader decodes a fragment read by ranges a column
	// per goroutine, each with a recover.
	return pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(batchSize), PreAllocBinaryData: true}, mem)
}

// CheckFooter refuses a Parquet footer that the Parquet reader would
// trip over: a column of no known physical type (its reader is nil), or a
// column chunk that does not lie within the file it was read from (the
// reader allocates what a chunk's recorded length says before reading).
// The reader builds the readers of a struct's fields in goroutines of its
// own, where a panic is out of reach of any recover and kills the process;
// so such a footer must stop before it. So must an Arrow schema kept in
// the footer (ARROW:schema) whose message claims more than it holds: the
// reader allocates the lengths it claims (a body of 32 GB: a fatal out of
// memory, past any recover).
func CheckFooter(md *metadata.FileMetaData) error {
	if err := checkArrowSchema(md.KeyValueMetadata()); err != nil {
		return err
	}
	for i := range md.Schema.NumColumns() {
		col := md.Schema.Column(i)
		switch col.PhysicalType() {
		case parquet.Types.Boolean, parquet.Types.Int32, parquet.Types.Int64, parquet.Types.Int96,
			parquet.Types.Float, parquet.Types.Double, parquet.Types.ByteArray, parquet.Types.FixedLenByteArray:
		default:
			return fmt.Errorf("column %s: unknown physical type %d", col.Path(), col.PhysicalType())
		}
	}
	size := md.GetSourceFileSize()
	for rg := range md.NumRowGroups() {
		rgmd := md.RowGroup(rg)
		for c := range rgmd.NumColumns() {
			col, err := rgmd.ColumnChunk(c)
			if err != nil {
				return fmt.Errorf("row group %d column %d: %w", rg, c, err)
			}
			start := col.DataPageOffset()
			if col.HasDictionaryPage() && col.DictionaryPageOffset() > 0 && start > col.DictionaryPageOffset() {
				start = col.DictionaryPageOffset()
			}
			n := col.TotalCompressedSize()
			if start < 0 || n < 0 || start > size || n > size-start {
				return fmt.Errorf("row group %d column %s: a chunk of %d bytes at %d does not lie within the %d-byte file", rg, col.PathInSchema(), n, start, size)
			}
		}
	}
	return nil
}

// checkArrowSchema checks the footer's serialized Arrow schema, decoded
// from base64 as the Parquet reader decodes it, with ipcguard.
func checkArrowSchema(kv metadata.KeyValueMetadata) error {
	v := kv.FindValue("ARROW:schema")
	if v == nil {
		return nil
	}
	var data []byte
	var err error
	if len(*v)%4 == 0 {
		data, err = base64.StdEncoding.DecodeString(*v)
	}
	if len(data) == 0 || err != nil {
		data, err = base64.RawStdEncoding.DecodeString(*v)
	}
	if err != nil {
		return fmt.Errorf("footer's ARROW:schema: %w", err)
	}
	if err := ipcguard.CheckSchema(data); err != nil {
		return fmt.Errorf("footer's ARROW:schema: %w", err)
	}
	return nil
}

// ChunkRanges returns the byte ranges of the column chunks of leaves in
// row groups rgs, in the order a scan reads them.
func ChunkRanges(md *metadata.FileMetaData, rgs, leaves []int) [][2]int64 {
	var out [][2]int64
	for _, rg := range rgs {
		rgmd := md.RowGroup(rg)
		for _, leaf := range leaves {
			col, err := rgmd.ColumnChunk(leaf)
			if err != nil {
				continue
			}
			start := col.DataPageOffset()
			if col.HasDictionaryPage() && col.DictionaryPageOffset() > 0 && start > col.DictionaryPageOffset() {
				start = col.DictionaryPageOffset()
			}
			out = append(out, [2]int64{start, col.TotalCompressedSize()})
		}
	}
	return out
}

// LayOut returns what a fragment's entry records of where its bytes lie
// (format.Fragment.Chunks and Footer) for the object whose footer is md,
// written through up; none when md's chunks are too many or out of order,
// or up did not end as a Parquet object does.
func LayOut(md *metadata.FileMetaData, up *Upload) (chunks []int64, footer int64) {
	footer = up.Footer()
	if footer == 0 || md.NumRowGroups() == 0 {
		return nil, 0
	}
	leaves := make([]int, md.Schema.NumColumns())
	for i := range leaves {
		leaves[i] = i
	}
	rgs := make([]int, md.NumRowGroups())
	for i := range rgs {
		rgs[i] = i
	}
	if len(rgs)*len(leaves) > format.MaxLaidOutChunks {
		return nil, 0
	}
	ranges := ChunkRanges(md, rgs, leaves)
	if len(ranges) != len(rgs)*len(leaves) {
		return nil, 0
	}
	starts := make([]int64, len(ranges))
	for i, r := range ranges {
		starts[i] = r[0]
	}
	last := ranges[len(ranges)-1]
	if chunks = format.LayOut(starts, last[0]+last[1]); chunks == nil || last[0]+last[1] > up.N-footer {
		return nil, 0
	}
	return chunks, footer
}
