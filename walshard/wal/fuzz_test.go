package wal

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// FuzzDecodeEntry: any bytes at a WAL position decode to rows of the
// table's schema that pass evolve.Conform, or give a *CorruptEntryError or
// a *PoisonEntryError; never a panic.
func FuzzDecodeEntry(f *testing.F) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(testenv.Arrow, schema)
	for i := range 5 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		lb := b.Field(1).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.StringBuilder).Append("x")
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	data, err := EncodeEntry(&Entry{Kind: KindData, Epoch: 1, Position: 7, Id: format.NewID(), Batches: []arrow.RecordBatch{rec}}, schema, false)
	if err != nil {
		f.Fatal(err)
	}
	pq, err := EncodeEntry(&Entry{Kind: KindData, Epoch: 1, Position: 7, Id: format.NewID(), Batches: []arrow.RecordBatch{rec}}, schema, true)
	if err != nil {
		f.Fatal(err)
	}
	up, err := EncodeEntry(&Entry{Kind: KindData, Epoch: 1, Position: 7, Id: format.NewID(), Batches: []arrow.RecordBatch{rec}, Keys: []string{"id"}}, schema, true)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(up)
	fence, _ := EncodeEntry(&Entry{Kind: KindFence, Epoch: 2, Position: 7, Id: format.NewID()}, schema, false)
	f.Add(data)
	f.Add(pq)
	f.Add(fence)
	f.Add(data[:70])
	f.Add(pq[:len(pq)-20])
	f.Fuzz(func(t *testing.T, d []byte) {
		e, err := DecodeEntry("w1", "wal/x", 7, d, schema, false)
		if err != nil {
			if !errors.Is(err, ErrCorruptEntry) && !errors.Is(err, ErrPoisonEntry) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		defer fragment.ReleaseAll(e.Batches)
		for _, r := range e.Batches {
			c, err := evolve.Conform(schema, r, evolve.ConformOptions{})
			if err != nil {
				t.Fatalf("a decoded batch does not conform: %v", err)
			}
			c.Release()
		}
	})
}

// An entry of format 1 whose Arrow payload (checksum and all) is a schema
// message claiming a 32 GiB body is a CorruptEntryError. The IPC reader
// allocated the body before reading it: a fatal out of memory, past any
// recover, for every process that replayed the shard.
func TestAnEntryWhosePayloadClaimsAHugeBodyIsCorrupt(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	data, err := EncodeEntry(&Entry{Kind: KindData, Epoch: 1, Position: 7, Id: format.NewID()}, schema, false)
	if err != nil {
		t.Fatal(err)
	}
	payload := testenv.SchemaMessageClaimingBody(1 << 35)
	data = append(data[:Header], payload...)
	binary.LittleEndian.PutUint64(data[54:], uint64(len(payload)))
	binary.LittleEndian.PutUint32(data[62:], crc32.Checksum(payload, crcTable))
	var ce *CorruptEntryError
	if _, err := DecodeEntry("w1", "wal/x", 7, data, schema, false); !errors.As(err, &ce) {
		t.Fatalf("%v, want a CorruptEntryError", err)
	}
}
