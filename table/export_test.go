package table

import (
	"bytes"
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/table/format"

	"github.com/stratadb/strata/table/fragment"
)

// DecodeColumnsAtOnce reads every row group of a fragment held in memory
// as a scan reads a fragment read by ranges: the columns of each batch
// decoded at once, a goroutine each, and a panic in the caller's
// goroutine recovered as readFragment does. It returns the rows read.
func DecodeColumnsAtOnce(ctx context.Context, data []byte) (rows int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("damaged: %v", r)
		}
	}()
	fr, err := fragment.NewReader(bytes.NewReader(data), nil, memory.DefaultAllocator, 100)
	if err != nil {
		return 0, err
	}
	for rg := range fr.ParquetReader().NumRowGroups() {
		rr, err := fragment.NewRowGroupReader(ctx, fr, memory.DefaultAllocator, nil, rg, 100, true)
		if err != nil {
			return rows, err
		}
		for {
			rec, err := rr.Next()
			if err != nil || rec == nil {
				rr.Release()
				if err != nil {
					return rows, err
				}
				break
			}
			rows += rec.NumRows()
			rec.Release()
		}
	}
	return rows, nil
}

// DecodeIndex is decodeIndex, for tests: the entries of a key index
// object, in its order.
func DecodeIndex(key string, data []byte) ([]IndexEntry, error) {
	ix, err := decodeIndex(key, data)
	if err != nil {
		return nil, err
	}
	out := make([]IndexEntry, len(ix.keys))
	for i := range out {
		out[i] = IndexEntry{Key: ix.keys[i], Fragment: ix.frags[i], Offset: ix.offs[i]}
	}
	return out, nil
}

// DecodeHashIndex reads a paged key index object whole, for tests: its
// entries, in its order.
func DecodeHashIndex(key string, data []byte) ([]HashEntry, error) {
	h, err := decodeHashDirectory(key, data, 0, data)
	if err != nil {
		return nil, err
	}
	var out []HashEntry
	for i := range h.first {
		es, err := h.block(data, 0, i)
		if err != nil {
			return nil, err
		}
		if n := len(out); n > 0 && len(es) > 0 && compareEntries(KeyHash(out[n-1].Key), out[n-1], KeyHash(es[0].Key), es[0]) >= 0 {
			return nil, format.Corrupt(key, fmt.Sprintf("block %d out of order", i), nil)
		}
		out = append(out, es...)
	}
	return out, nil
}
