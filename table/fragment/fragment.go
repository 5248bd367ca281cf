package fragment

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// RowGroupRows bounds a fragment's row groups, so that a reader's memory
// is bounded by a row group, and statistics prune at that grain.
const RowGroupRows = 16384

// WholeReadLimit: fragments up to this size are read with one GET; larger
// ones with ranged reads of the footer and the column chunks needed.
const WholeReadLimit = 4 << 20

// Writer streams record batches into one new Parquet fragment
// object (zstd, with row-group statistics). Memory is bounded by a row
// group: the object is uploaded as it is written.
type Writer struct {
	schema *arrow.Schema
	stored *arrow.Schema // StoredSchema(schema): the object's columns
	key    string
	up     *Upload
	fw     *pqarrow.FileWriter
	stats  []format.StatsAcc
	rows   int64
	closed bool
	// pending batches, written as one row group once they reach
	// RowGroupRows: whole row groups stream their pages to the object,
	// where a buffered row group would grow (and copy) one buffer per
	// column.
	pending     []arrow.RecordBatch
	pendingRows int64
	// Row groups are encoded by a goroutine of their own, so that the
	// caller goes on producing the next one (reading, in a compaction)
	// meanwhile: one row group is encoded while the next one gathers.
	rowGroups chan []arrow.RecordBatch
	encoded   chan error
}

// Upload streams what is written to it into a new object (or, in
// memory, into a buffer), counting the bytes.
type Upload struct {
	w        io.Writer
	pw       *io.PipeWriter // the PUT's body; nil in memory
	N        int64
	trailer  [8]byte // the last 8 bytes written (of N, when fewer)
	done     chan error
	finished bool
	err      error
}

func StartUpload(ctx context.Context, b blob.Bucket, key string) *Upload {
	pr, pw := io.Pipe()
	u := &Upload{w: pw, pw: pw, done: make(chan error, 1)}
	go func() {
		err := b.Put(ctx, key, pr)
		pr.CloseWithError(err) // unblock the writer if the upload failed
		u.done <- err
	}()
	return u
}

func (u *Upload) Write(p []byte) (int, error) {
	n, err := u.w.Write(p)
	u.N += int64(n)
	if n >= 8 {
		copy(u.trailer[:], p[n-8:n])
	} else {
		copy(u.trailer[:], u.trailer[n:])
		copy(u.trailer[8-n:], p[:n])
	}
	return n, err
}

// Footer is the length of the Parquet footer written, with its 8-byte
// trailer (format.Fragment.Footer); 0 when what was written does not end
// as a Parquet object does.
func (u *Upload) Footer() int64 {
	n, ok := format.FooterLen(u.trailer[:])
	if !ok || u.N < 12 || n+8 > u.N-4 {
		return 0
	}
	return n + 8
}

// Finish ends the object — or, given an error, abandons it — and returns
// the upload's error (in memory, the error given). Later calls return the
// first one's result.
func (u *Upload) Finish(err error) error {
	if !u.finished {
		u.finished = true
		if u.pw == nil {
			u.err = err
		} else {
			u.pw.CloseWithError(err)
			u.err = <-u.done
		}
	}
	return u.err
}

// NewWriter starts a fragment with a fresh key in b. The caller
// must Close (to finish) or Abort it.
func NewWriter(ctx context.Context, b blob.Bucket, schema *arrow.Schema) (*Writer, error) {
	return NewWriterAt(ctx, b, schema, format.NewFragmentKey())
}

// NewWriterAt starts a fragment object at key, which must be a
// fresh name no other writer uses.
func NewWriterAt(ctx context.Context, b blob.Bucket, schema *arrow.Schema, key string) (*Writer, error) {
	return newFragmentWriter(schema, key, StartUpload(ctx, b, key))
}

// newFragmentWriter writes a fragment named key (for errors and the
// result) through up.
func newFragmentWriter(schema *arrow.Schema, key string, up *Upload) (*Writer, error) {
	// The object holds the columns under their stored names (see
	// evolve.go); rows are written under the table's.
	w := &Writer{schema: schema, stored: evolve.StoredSchema(schema), key: key, up: up}
	fw, err := pqarrow.NewFileWriter(w.stored, w.up, Props(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		_ = w.up.Finish(err)
		return nil, fmt.Errorf("table: start fragment: %w", err)
	}
	w.fw = fw
	w.rowGroups, w.encoded = make(chan []arrow.RecordBatch), make(chan error, 1)
	go w.encode()
	w.stats = make([]format.StatsAcc, schema.NumFields())
	for i, f := range schema.Fields() {
		w.stats[i].Name = evolve.StoredName(f)
	}
	return w, nil
}

// Write appends a batch; its schema must be the fragment's.
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if err := evolve.CheckSchema(w.schema, rec.Schema()); err != nil {
		return err
	}
	for i := range w.stats {
		w.stats[i].Add(rec.Column(i))
	}
	w.rows += rec.NumRows()
	w.pending = append(w.pending, WithTypesOf(w.stored, rec))
	w.pendingRows += rec.NumRows()
	if w.pendingRows >= RowGroupRows {
		return w.flushPending()
	}
	return nil
}

// EndRowGroup ends the row group being gathered: the rows written since
// the last one ended form a row group of their own (at most RowGroupRows
// rows, as any). A fragment sorted by a cluster key is written in row
// groups smaller than RowGroupRows, so that their statistics rule out more
// of it.
func (w *Writer) EndRowGroup() error {
	return w.flushPending()
}

// WithTypesOf returns rec (retained) with the very type values of schema,
// which it matches (CheckSchema): arrow-go's writers compare types with a
// check that equal types of different values can fail (see TypesEqual).
// The caller releases the result.
func WithTypesOf(schema *arrow.Schema, rec arrow.RecordBatch) arrow.RecordBatch {
	if rec.Schema() == schema {
		rec.Retain()
		return rec
	}
	cols := make([]arrow.Array, rec.NumCols())
	for i, f := range schema.Fields() {
		if col := rec.Column(i); col.DataType() == f.Type {
			col.Retain()
			cols[i] = col
		} else {
			cols[i] = evolve.RelabelArray(f.Type, col)
		}
	}
	out := array.NewRecordBatch(schema, cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out
}

// flushPending hands the pending batches to the encoder as row groups.
func (w *Writer) flushPending() error {
	if len(w.pending) == 0 {
		return nil
	}
	// An encoder that failed drains and releases what it is handed; its
	// error comes out of Close.
	w.rowGroups <- w.pending
	w.pending, w.pendingRows = nil, 0
	return nil
}

// encode writes the row groups it is handed, releasing their batches; it
// reports its first error (or nil) on w.encoded when rowGroups is closed.
func (w *Writer) encode() {
	var err error
	for batches := range w.rowGroups {
		if err == nil {
			err = w.writeRowGroup(batches)
		}
		for _, rec := range batches {
			rec.Release()
		}
		if err != nil {
			break
		}
	}
	for batches := range w.rowGroups { // drain after an error
		for _, rec := range batches {
			rec.Release()
		}
	}
	w.encoded <- err
}

// writeRowGroup encodes batches as row groups. A panic in the encoder
// (a bug, or data no check caught) is an error of this fragment, never the
// end of the process: this runs on a goroutine of its own.
func (w *Writer) writeRowGroup(batches []arrow.RecordBatch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("table: write fragment %s: encoding panicked: %v", w.key, r)
		}
	}()
	tbl := array.NewTableFromRecords(w.stored, batches)
	defer tbl.Release()
	if werr := w.fw.WriteTable(tbl, RowGroupRows); werr != nil {
		return fmt.Errorf("table: write fragment %s: %w", w.key, werr)
	}
	return nil
}

// finishEncoding stops the encoder and returns its error.
func (w *Writer) finishEncoding() error {
	close(w.rowGroups)
	return <-w.encoded
}

func (w *Writer) releasePending() {
	for _, rec := range w.pending {
		rec.Release()
	}
	w.pending, w.pendingRows = nil, 0
}

// Rows is the number of rows written so far.
func (w *Writer) Rows() int64 { return w.rows }

// Close finishes the object and returns its manifest entry (ID unset: the
// commit assigns it).
func (w *Writer) Close() (format.Fragment, error) {
	if w.closed {
		return format.Fragment{}, fmt.Errorf("table: fragment writer closed twice")
	}
	w.closed = true
	err := w.flushPending()
	if eerr := w.finishEncoding(); err == nil {
		err = eerr
	}
	if cerr := w.fw.Close(); err == nil {
		err = cerr
	}
	if uerr := w.up.Finish(err); err == nil {
		err = uerr
	}
	if err != nil {
		return format.Fragment{}, fmt.Errorf("table: write fragment %s: %w", w.key, err)
	}
	f := format.Fragment{Key: w.key, Rows: w.rows, Bytes: w.up.N, Columns: make([]format.ColumnStats, len(w.stats)), Created: time.Now().UTC(),
		SchemaID: evolve.SchemaID(w.schema)}
	if md, err := w.fw.FileMetadata(); err == nil {
		f.Chunks, f.Footer = LayOut(md, w.up)
	}
	for i := range w.stats {
		f.Columns[i] = w.stats[i].Result()
	}
	return f, nil
}

// Abort abandons the fragment. An object may remain in the bucket; no
// manifest references it, and garbage collection removes it.
func (w *Writer) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	w.releasePending()
	_ = w.finishEncoding()
	_ = w.up.Finish(fmt.Errorf("fragment aborted"))
}

// Write writes batches as one fragment.
func Write(ctx context.Context, b blob.Bucket, schema *arrow.Schema, batches ...arrow.RecordBatch) (format.Fragment, error) {
	w, err := NewWriter(ctx, b, schema)
	if err != nil {
		return format.Fragment{}, err
	}
	for _, rec := range batches {
		if err := w.Write(rec); err != nil {
			w.Abort()
			return format.Fragment{}, err
		}
	}
	return w.Close()
}

// Encode encodes batches of schema as the bytes of one fragment
// object, in memory, as NewWriter would write them: for an object
// that must be created with a condition (a shard's WAL entry), which a
// streamed upload cannot be, and to tell whether rows encode at all. The
// Fragment holds rows, size and statistics; its Key is unset.
//
// seal, when not nil, is given the object's bytes before its footer (the
// pages) and returns a key-value pair the footer holds besides: a
// checksum of them, say (see FooterValue).
func Encode(schema *arrow.Schema, batches []arrow.RecordBatch, seal func(pages []byte) (key, value string)) ([]byte, format.Fragment, error) {
	if seal == nil {
		return EncodeWith(schema, batches, nil)
	}
	return EncodeWith(schema, batches, func(pages []byte, _ format.Fragment) (string, string) { return seal(pages) })
}

// EncodeWith is Encode with seal given the fragment's
// rows and statistics too, for a footer value that records them (a
// shard's flush object).
func EncodeWith(schema *arrow.Schema, batches []arrow.RecordBatch, seal func(pages []byte, f format.Fragment) (key, value string)) ([]byte, format.Fragment, error) {
	var buf bytes.Buffer
	w, err := newFragmentWriter(schema, "(in memory)", &Upload{w: &buf})
	if err != nil {
		return nil, format.Fragment{}, err
	}
	for _, rec := range batches {
		if err := w.Write(rec); err != nil {
			w.Abort()
			return nil, format.Fragment{}, err
		}
	}
	f, err := w.Close()
	if err != nil {
		return nil, format.Fragment{}, err
	}
	f.Key = ""
	if seal == nil {
		return buf.Bytes(), f, nil
	}
	md, err := w.fw.FileMetadata()
	if err != nil {
		return nil, format.Fragment{}, err
	}
	// The footer is written again, with the pair, in place of the first.
	footer, _ := format.FooterLen(buf.Bytes()[buf.Len()-8:]) // written just now
	pages := buf.Len() - 8 - int(footer)
	kv := md.KeyValueMetadata()
	if err := kv.Append(seal(buf.Bytes()[:pages], f)); err != nil {
		return nil, format.Fragment{}, err
	}
	md.FileMetaData.KeyValueMetadata = kv
	buf.Truncate(pages)
	if err := WriteFooter(&buf, md); err != nil {
		return nil, format.Fragment{}, err
	}
	f.Bytes = int64(buf.Len())
	f.Footer = f.Bytes - int64(pages)
	return buf.Bytes(), f, nil
}

// WriteFooter ends a Parquet object: its footer, the footer's length and
// the magic.
func WriteFooter(w io.Writer, md *metadata.FileMetaData) error {
	n, err := md.WriteTo(w, nil)
	if err != nil {
		return err
	}
	var tail [8]byte
	binary.LittleEndian.PutUint32(tail[:4], uint32(n))
	copy(tail[4:], "PAR1")
	_, err = w.Write(tail[:])
	return err
}

// FooterValue reads a Parquet object held in memory (data) for the value
// its footer holds under key (ok false when it holds none), and returns
// its bytes before the footer (the pages). An object that is not Parquet,
// or whose footer does not decode, is an error.
func FooterValue(data []byte, key string) (value string, ok bool, pages []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("parquet footer: %v", r)
		}
	}()
	if len(data) < 12 || string(data[:4]) != "PAR1" {
		return "", false, nil, errors.New("not a Parquet object")
	}
	n, ok := format.FooterLen(data[len(data)-8:])
	if !ok {
		return "", false, nil, errors.New("not a Parquet object")
	}
	if n > int64(len(data)-12) {
		return "", false, nil, fmt.Errorf("parquet footer of %d bytes in an object of %d", n, len(data))
	}
	start := len(data) - 8 - int(n)
	md, err := metadata.NewFileMetaData(data[start:len(data)-8], nil)
	if err != nil {
		return "", false, nil, fmt.Errorf("parquet footer: %w", err)
	}
	if v := md.KeyValueMetadata().FindValue(key); v != nil {
		return *v, true, data[:start], nil
	}
	return "", false, data[:start], nil
}

// Decode reads a fragment object held in memory (named key, for
// errors) as record batches of the schema stored in it. A damaged object
// is a *CorruptError.
func Decode(ctx context.Context, key string, data []byte) (out []arrow.RecordBatch, err error) {
	defer func() {
		if r := recover(); r != nil {
			ReleaseAll(out)
			out, err = nil, format.Corrupt(key, "parquet is damaged", fmt.Errorf("%v", r))
		}
	}()
	fr, err := NewReader(bytes.NewReader(data), nil, memory.DefaultAllocator, RowGroupRows)
	if err != nil {
		return nil, format.Corrupt(key, "parquet footer is damaged", err)
	}
	defer fr.ParquetReader().Close()
	tbl, err := fr.ReadTable(ctx)
	if err != nil {
		return nil, format.Corrupt(key, "parquet pages are damaged", err)
	}
	defer tbl.Release()
	if want := fr.ParquetReader().NumRows(); tbl.NumRows() != want {
		return nil, format.Corrupt(key, "parquet pages are damaged", fmt.Errorf("%d rows read, the footer says %d", tbl.NumRows(), want))
	}
	tr := array.NewTableReader(tbl, RowGroupRows)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		rec.Retain()
		out = append(out, rec)
	}
	return out, nil
}

// ReleaseAll releases every batch of recs.
func ReleaseAll(recs []arrow.RecordBatch) {
	for _, rec := range recs {
		rec.Release()
	}
}

// Props are the writer properties every fragment is written with.
func Props() *parquet.WriterProperties {
	return parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCompressionLevel(1),
		parquet.WithStats(true),
		parquet.WithMaxRowGroupLength(RowGroupRows),
		parquet.WithDictionaryDefault(false),
	)
}
