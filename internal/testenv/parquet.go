package testenv

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"
)

// NegativeChunkLength returns a copy of the Parquet file data whose footer
// records the compressed size of column chunk c of row group 0 as
// negative: its zigzag varint, after the field header 0x16 (field 7, an
// i64, following field 6), less one — zigzag(2n − 1) is −n. It fails the
// test when that size is not in the footer exactly once.
func NegativeChunkLength(t testing.TB, data []byte, c int) []byte {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	col, err := pf.MetaData().RowGroup(0).ColumnChunk(c)
	if err != nil {
		t.Fatal(err)
	}
	n := col.TotalCompressedSize()
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
