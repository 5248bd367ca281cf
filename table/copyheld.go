package table

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// HeldCopy is a Parquet object held in memory, written as the table's
// fragments are, read and checked for a copy of its pages into a new
// fragment (CheckHeld, WriteHeldCopies): a shard's flush object, whose
// rows a merge writes into the table without decoding them.
type HeldCopy struct {
	key    string
	rows   int64
	schema uint64 // the SchemaID it was checked against
	groups []*sourceRowGroup
}

// Rows returns the rows the object holds.
func (h *HeldCopy) Rows() int64 { return h.rows }

// CheckHeld reads data, the object key held in memory, for a copy of its
// pages. Its footer and every page are checked as CopyFragments checks a
// source's: a damaged object is a *CorruptError. It must hold rows rows,
// written under schema as a fragment of the table is now, with manifest
// statistics for every column (columns, as its writer recorded them), its
// footer's key-value pairs but those named in omit as a fragment's: an
// object written otherwise (before a schema change, by another version)
// is ErrNotCopyable, and is read by decoding it.
func CheckHeld(schema *arrow.Schema, key string, data []byte, rows int64, columns []format.ColumnStats, omit ...string) (_ *HeldCopy, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = format.Corrupt(key, "parquet data is damaged", fmt.Errorf("%v", r))
		}
	}()
	ok := len(columns) == schema.NumFields()
	for i := 0; ok && i < len(columns); i++ {
		ok = columns[i].Name == evolve.StoredName(schema.Field(i))
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s has no statistics for the table's columns", ErrNotCopyable, key)
	}
	ref, err := referenceFooter(schema)
	if err != nil {
		return nil, err
	}
	src := bytes.NewReader(data)
	pf, err := file.NewParquetReader(src, file.WithReadProps(parquet.NewReaderProperties(memory.DefaultAllocator)))
	if err != nil {
		return nil, format.Corrupt(key, "not a readable parquet file", err)
	}
	md := pf.MetaData()
	if err := fragment.CheckFooter(md); err != nil {
		return nil, format.Corrupt(key, "parquet footer is damaged", err)
	}
	if !md.Schema.Equals(ref.Schema) || !kvWithout(md.KeyValueMetadata(), omit).Equals(ref.KeyValueMetadata()) {
		return nil, fmt.Errorf("%w: %s was written under another schema", ErrNotCopyable, key)
	}
	if md.NumRows != rows {
		return nil, format.Corrupt(key, fmt.Sprintf("holds %d rows, its writer recorded %d", md.NumRows, rows), nil)
	}
	h := &HeldCopy{key: key, rows: rows, schema: evolve.SchemaID(schema)}
	f := &format.Fragment{Key: key, Rows: rows, Bytes: int64(len(data)), Columns: columns}
	err = emitRowGroups(f, md, src, data, nil, fragment.Props(), func(u *sourceRowGroup) bool {
		h.groups = append(h.groups, u)
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(h.groups) == 0 && rows > 0 {
		return nil, format.Corrupt(key, "holds rows and no row group", nil)
	}
	return h, nil
}

// reference holds the last referenceFooter made: a merge checks every
// flush object it copies against the same schema.
var reference struct {
	sync.Mutex
	schema *arrow.Schema
	md     *metadata.FileMetaData
}

// referenceFooter is the footer of a fragment of schema without rows:
// its Parquet schema and key-value pairs are every fragment's.
func referenceFooter(schema *arrow.Schema) (*metadata.FileMetaData, error) {
	reference.Lock()
	defer reference.Unlock()
	if r := reference.schema; r != nil && (r == schema || r.Equal(schema) && r.Metadata().Equal(schema.Metadata())) {
		return reference.md, nil
	}
	data, _, err := fragment.Encode(schema, nil, nil)
	if err != nil {
		return nil, err
	}
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	reference.schema, reference.md = schema, pf.MetaData()
	return reference.md, nil
}

// WriteHeldCopies writes the rows of copies, in order, as one new fragment
// of schema at key, copying their pages (as CopyFragments does) and
// leaving out of its footer the key-value pairs named in omit, in row
// groups of at most rowGroupBytes of column chunks (0: 64 MiB) — what it
// holds of them at once. The
// fragment's statistics are merged from the copies' (CheckHeld). A copy
// checked against another schema is ErrNotCopyable, and nothing is
// written.
func WriteHeldCopies(ctx context.Context, b blob.Bucket, schema *arrow.Schema, key string, copies []*HeldCopy, rowGroupBytes int64, omit ...string) (format.Fragment, error) {
	id := evolve.SchemaID(schema)
	for _, h := range copies {
		if h.schema != id {
			return format.Fragment{}, fmt.Errorf("%w: %s was checked against another schema", ErrNotCopyable, h.key)
		}
	}
	if len(copies) == 0 {
		return format.Fragment{}, fmt.Errorf("%w: nothing to copy", ErrNotCopyable)
	}
	w := newPageCopier(ctx, b, key)
	w.omit = slices.Clone(omit)
	if rowGroupBytes > 0 {
		w.maxBytes = rowGroupBytes
	}
	var rows int64
	for _, h := range copies {
		rows += h.rows
		for _, u := range h.groups {
			if !w.add(u) {
				break
			}
		}
	}
	if w.err != nil {
		w.abort()
		return format.Fragment{}, w.err
	}
	out, err := w.close()
	if err != nil {
		return format.Fragment{}, err
	}
	out.Columns = mergeColumnStats(w.stats)
	out.SchemaID = id
	if out.Rows != rows {
		return format.Fragment{}, fmt.Errorf("table: copy into %s: wrote %d rows of %d", out.Key, out.Rows, rows)
	}
	return out, nil
}
