package format

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/stratadb/strata/blob"
)

// FooterValueAt reads the value the footer of Parquet object key (of
// size bytes) holds under name, reading only the object's tail: one
// ranged GET of its last 64 KiB, and a second when the footer is longer.
// ok is false when the footer holds no such value. An object that is not
// Parquet, or whose footer does not decode, is a *CorruptError naming
// key; the store's errors come as the store gave them.
func FooterValueAt(ctx context.Context, b blob.Bucket, key string, size int64, name string) (value string, ok bool, err error) {
	if size < 12 {
		return "", false, Corrupt(key, fmt.Sprintf("not a Parquet object (%d bytes)", size), nil)
	}
	r := blob.NewReaderAtSize(ctx, b, key, size)
	tail := make([]byte, min(size, TailBytes))
	if _, err := r.ReadAt(tail, size-int64(len(tail))); err != nil {
		return "", false, err
	}
	n, ok := FooterLen(tail[len(tail)-8:])
	if !ok {
		return "", false, Corrupt(key, "not a Parquet object", nil)
	}
	if n > size-12 {
		return "", false, Corrupt(key, fmt.Sprintf("parquet footer of %d bytes in an object of %d", n, size), nil)
	}
	if n+8 > int64(len(tail)) {
		tail = make([]byte, n+8)
		if _, err := r.ReadAt(tail, size-8-n); err != nil {
			return "", false, err
		}
	}
	footer := tail[int64(len(tail))-8-n : len(tail)-8]
	md, err := decodeFooter(footer)
	if err != nil {
		return "", false, Corrupt(key, "parquet footer is damaged", err)
	}
	if v := md.KeyValueMetadata().FindValue(name); v != nil {
		return *v, true, nil
	}
	return "", false, nil
}

// FooterLen reads trailer, the last 8 bytes of a Parquet object: the
// length of its footer (before them); ok is false when they do not end
// as a Parquet object does ("PAR1").
func FooterLen(trailer []byte) (n int64, ok bool) {
	if len(trailer) != 8 || string(trailer[4:]) != "PAR1" {
		return 0, false
	}
	return int64(binary.LittleEndian.Uint32(trailer[:4])), true
}

// decodeFooter decodes a Parquet footer; a panic on damaged bytes is an
// error.
func decodeFooter(footer []byte) (md *metadata.FileMetaData, err error) {
	defer func() {
		if r := recover(); r != nil {
			md, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return metadata.NewFileMetaData(footer, nil)
}

// DecodedBytes is what decoding a Parquet object held in memory (data)
// into Arrow holds, as a scan's weight counts it: each column chunk's
// uncompressed bytes (Strata writes no dictionaries), at least 8 bytes a
// value. An object whose footer does not decode is an error.
func DecodedBytes(data []byte) (total int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			total, err = 0, fmt.Errorf("parquet footer: %v", r)
		}
	}()
	if len(data) < 12 {
		return 0, errors.New("not a Parquet object")
	}
	n, ok := FooterLen(data[len(data)-8:])
	if !ok {
		return 0, errors.New("not a Parquet object")
	}
	if n > int64(len(data)-12) {
		return 0, fmt.Errorf("parquet footer of %d bytes in an object of %d", n, len(data))
	}
	md, err := decodeFooter(data[int64(len(data))-8-n : len(data)-8])
	if err != nil {
		return 0, fmt.Errorf("parquet footer: %w", err)
	}
	for rg := range md.NumRowGroups() {
		rgmd := md.RowGroup(rg)
		for leaf := range md.NumColumns() {
			cc, err := rgmd.ColumnChunk(leaf)
			if err != nil {
				return 0, fmt.Errorf("parquet footer: %w", err)
			}
			total += max(cc.TotalUncompressedSize(), 8*cc.NumValues())
		}
	}
	return total, nil
}
