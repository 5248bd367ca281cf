package testenv

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// NegativeChunkLength returns a copy of the Parquet file data whose footer
// records the compressed size of column chunk c of row group 0 as
// negative: its zigzag varint, after the field header 0x16 (field 7, an
// i64, following field 6), less one — zigzag(2n − 1) is −n. It fails the
// test when that size is not in the footer exactly once.
func NegativeChunkLength(t testing.TB, data []byte, c int) []byte {
	t.Helper()
	n := chunk(t, data, c).TotalCompressedSize()
	flen := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	start := len(data) - 8 - flen
	want := binary.AppendUvarint([]byte{0x16}, uint64(n)<<1)
	at := bytes.Index(data[start:len(data)-8], want)
	if at < 0 || bytes.Contains(data[start+at+1:len(data)-8], want) {
		t.Fatalf("the compressed size %d of column %d is not in the footer once", n, c)
	}
	out := bytes.Clone(data)
	out[start+at+1]--
	return out
}

// SchemaMessageClaimingBody returns an Arrow IPC stream of one message, a
// schema of no fields, whose metadata claims a body of n bytes: a
// flatbuffer Message {version V5, header_type Schema, header, bodyLength}.
func SchemaMessageClaimingBody(n uint64) []byte {
	fb := make([]byte, 48)
	le := binary.LittleEndian
	le.PutUint32(fb[0:], 16) // root: the Message table at 16
	// The Message's vtable at 4: 12 bytes, a 24-byte table, fields at 4,
	// 6, 8 and 16.
	for i, v := range []uint16{12, 24, 4, 6, 8, 16} {
		le.PutUint16(fb[4+2*i:], v)
	}
	le.PutUint32(fb[16:], 12) // the table's vtable is 12 bytes before it
	le.PutUint16(fb[20:], 4)  // version V5
	fb[22] = 1                // header type: Schema
	le.PutUint32(fb[24:], 20) // header: the Schema table at 24 + 20
	le.PutUint64(fb[32:], n)  // bodyLength
	le.PutUint16(fb[40:], 4)  // the Schema's vtable: no fields
	le.PutUint16(fb[42:], 4)
	le.PutUint32(fb[44:], 4) // the Schema table, its vtable 4 bytes before
	msg := binary.LittleEndian.AppendUint32(nil, 0xFFFFFFFF)
	msg = binary.LittleEndian.AppendUint32(msg, uint32(len(fb)))
	return append(msg, fb...)
}

// chunk returns the footer's entry of column chunk c of row group 0 of
// the Parquet file data.
func chunk(t testing.TB, data []byte, c int) *metadata.ColumnChunkMetaData {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	col, err := pf.MetaData().RowGroup(0).ColumnChunk(c)
	if err != nil {
		t.Fatal(err)
	}
	return col
}

// FirstPageClaimsDictionary returns a copy of the Parquet file data whose
// first page of column c of row group 0 has the page type of a dictionary
// page: the page header's first field (0x15, the type, an i32) holds
// zigzag(0), a data page, made zigzag(2).
func FirstPageClaimsDictionary(t testing.TB, data []byte, c int) []byte {
	t.Helper()
	col := chunk(t, data, c)
	at := col.DataPageOffset()
	if col.HasDictionaryPage() || data[at] != 0x15 || data[at+1] != 0x00 {
		t.Fatalf("column %d: no data page header at %d", c, at)
	}
	out := bytes.Clone(data)
	out[at+1] = 0x04
	return out
}

// WriteParquet writes rec as a Parquet file to w, with props (nil: the
// defaults) and the Arrow writer's props; w is closed when it is an
// io.Closer.
func WriteParquet(t testing.TB, w io.Writer, rec arrow.RecordBatch, props *parquet.WriterProperties, arrowProps pqarrow.ArrowWriterProperties) {
	t.Helper()
	fw, err := pqarrow.NewFileWriter(rec.Schema(), w, props, arrowProps)
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
}
