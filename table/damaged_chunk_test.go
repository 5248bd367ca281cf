package table_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

var structSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "meta", Type: arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
	), Nullable: true},
}, nil)

// structBatch holds 500 rows of structSchema.
func structBatch() arrow.RecordBatch {
	b := array.NewRecordBuilder(testenv.Arrow, structSchema)
	defer b.Release()
	meta := b.Field(1).(*array.StructBuilder)
	for i := range 500 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		meta.Append(true)
		meta.FieldBuilder(0).(*array.Int64Builder).Append(int64(i * 7))
		meta.FieldBuilder(1).(*array.StringBuilder).Append("some words that repeat, some words that repeat")
	}
	return b.NewRecordBatch()
}

// structFragment encodes structBatch as a fragment.
func structFragment(t testing.TB) []byte {
	t.Helper()
	rec := structBatch()
	defer rec.Release()
	data, _, err := fragment.Encode(structSchema, []arrow.RecordBatch{rec}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A fragment whose footer gives a column chunk a negative length, in a
// table with a struct column, is a CorruptError naming it. The Parquet
// reader builds the readers of a struct's fields in goroutines of its own,
// where such a length panicked out of reach of any recover: the process
// died (a server, on every scan of the fragment).
func TestAFooterWithANegativeChunkLengthIsCorrupt(t *testing.T) {
	data := structFragment(t)
	for c := range 3 { // id, meta.a, meta.b
		bad := testenv.NegativeChunkLength(t, data, c)
		_, err := fragment.Decode(ctx, "data/x.parquet", bad)
		var ce *format.CorruptError
		if !errors.As(err, &ce) || ce.Key != "data/x.parquet" {
			t.Fatalf("column %d: %v, want a CorruptError naming the object", c, err)
		}
	}
}

// The same fragment in a table: a scan fails with a CorruptError naming
// it, where the process died.
func TestAScanOfAFragmentWithANegativeChunkLengthFailsCleanly(t *testing.T) {
	rec := structBatch()
	defer rec.Release()
	b, s, frag, data := oneFragmentTable(t, rec)
	scanFindsCorrupt(t, b, s, frag.Key, testenv.NegativeChunkLength(t, data, 2), "a fragment with a negative chunk length")
}

// oneFragmentTable makes a table in memory of rec's schema and appends rec:
// the bucket, the snapshot, the fragment and its object.
func oneFragmentTable(t *testing.T, rec arrow.RecordBatch) (blob.Bucket, *table.Snapshot, format.Fragment, []byte) {
	t.Helper()
	return oneFragmentTableIn(t, memBucket(t), rec)
}

// oneFragmentTableIn is oneFragmentTable in bucket b.
func oneFragmentTableIn(t *testing.T, b blob.Bucket, rec arrow.RecordBatch) (blob.Bucket, *table.Snapshot, format.Fragment, []byte) {
	t.Helper()
	if _, err := commit.Create(ctx, b, rec.Schema(), nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tb.Append(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	frag := res.Manifest.Fragments[0]
	data, err := b.Get(ctx, frag.Key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b, s, frag, data
}

// A fragment read by ranges (larger than the scan's read-ahead) whose
// first page of a column claims to be a dictionary page is a CorruptError
// naming it. A page header is not checksummed; the reader trips over this
// one with a nil dereference, and its parallel mode, which decoded such
// fragments a column per goroutine, had no recover there: the process
// died (a server, on every scan of the fragment; the compactor Job, on
// every run).
func TestADamagedPageOfAFragmentReadByRangesIsCorrupt(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "payload", Type: arrow.BinaryTypes.Binary},
	}, nil)
	// 6,000 rows of 1 KiB that does not compress: a 6 MB fragment, read
	// whole only up to 4 MiB.
	rb := array.NewRecordBuilder(testenv.Arrow, schema)
	defer rb.Release()
	rnd := rand.New(rand.NewPCG(1, 2))
	payload := make([]byte, 1024)
	for i := range 6000 {
		for j := range payload {
			payload[j] = byte(rnd.Uint32())
		}
		rb.Field(0).(*array.Int64Builder).Append(int64(i))
		rb.Field(1).(*array.BinaryBuilder).Append(payload)
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	b, s, frag, data := oneFragmentTable(t, rec)
	opts := table.ScanOptions{ReadAheadBytes: 1 << 20}
	if frag.Bytes <= 4<<20 || frag.Bytes <= opts.ReadAheadBytes {
		t.Fatalf("the fragment is %d bytes: it would be read whole", frag.Bytes)
	}
	for c := range 2 {
		scanWithFindsCorrupt(t, b, s, opts, frag.Key, testenv.FirstPageClaimsDictionary(t, data, c), fmt.Sprintf("a first page of column %d claiming to be a dictionary page", c))
	}
}

// FuzzDecodeColumnsAtOnce: whatever the bytes, decoding a fragment's
// columns at once, as a scan of a fragment read by ranges does, gives rows
// or an error. A panic that escapes, in a goroutine of the decode, ends the
// fuzzing process, which fails the target.
func FuzzDecodeColumnsAtOnce(f *testing.F) {
	data := structFragment(f)
	if rows, err := table.DecodeColumnsAtOnce(ctx, data); err != nil || rows != 500 {
		f.Fatalf("the undamaged fragment: %d rows, %v", rows, err)
	}
	bad := testenv.FirstPageClaimsDictionary(f, data, 1)
	if _, err := table.DecodeColumnsAtOnce(ctx, bad); err == nil {
		f.Fatal("a first page that claims to be a dictionary page decoded")
	}
	f.Add(data)
	f.Add(bad)
	f.Fuzz(func(t *testing.T, d []byte) {
		_, _ = table.DecodeColumnsAtOnce(ctx, d)
	})
}

// A Parquet file whose footer keeps an Arrow schema (ARROW:schema) whose
// message claims a body of 32 GiB is a CorruptError naming it. The Parquet
// reader allocated the body before reading it: a fatal out of memory, past
// any recover (a WAL entry so damaged killed every process that replayed
// the shard; found by fuzzing FuzzDecodeEntry).
func TestAFooterSchemaClaimingAHugeBodyIsCorrupt(t *testing.T) {
	data := parquetWithArrowSchema(t, testenv.SchemaMessageClaimingBody(1<<35))
	_, err := fragment.Decode(ctx, "data/x.parquet", data)
	var ce *format.CorruptError
	if !errors.As(err, &ce) || ce.Key != "data/x.parquet" {
		t.Fatalf("%v, want a CorruptError naming the object", err)
	}
	// So is such a schema where a manifest keeps it.
	if _, err := evolve.DecodeSchema(testenv.SchemaMessageClaimingBody(1 << 35)); err == nil {
		t.Fatal("DecodeSchema read a schema claiming a 32 GiB body")
	}
	// The same schema claiming no body reads.
	if _, err := fragment.Decode(ctx, "data/x.parquet", parquetWithArrowSchema(t, testenv.SchemaMessageClaimingBody(0))); err != nil {
		t.Fatalf("a footer schema claiming no body: %v", err)
	}
}

// parquetWithArrowSchema writes a Parquet file of one int64 column whose
// footer keeps schema, base64-encoded, as ARROW:schema.
func parquetWithArrowSchema(t *testing.T, schema []byte) []byte {
	t.Helper()
	md := arrow.NewMetadata([]string{"ARROW:schema"}, []string{base64.StdEncoding.EncodeToString(schema)})
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, &md)
	b := array.NewInt64Builder(testenv.Arrow)
	defer b.Release()
	b.AppendValues([]int64{1, 2, 3}, nil)
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(sc, []arrow.Array{col}, 3)
	defer rec.Release()
	var buf bytes.Buffer
	testenv.WriteParquet(t, &buf, rec, nil, pqarrow.DefaultWriterProps())
	return buf.Bytes()
}

// A fragment object shorter than the manifest records, large enough to be
// read whole in ranges at once, is a CorruptError naming it, as a small
// one is. The ranges cut short said only that the store might answer
// better next time (a retryable error): a server answered 503, and a
// client retried a damage that no retry mends.
func TestAFragmentShorterThanRecordedIsCorrupt(t *testing.T) {
	rec := rollouts.Batch(testenv.Arrow, 42, 1, 0, 6000) // a 6.7 MB fragment
	defer rec.Release()
	b, s, frag, data := oneFragmentTable(t, rec)
	if frag.Bytes <= 4<<20 {
		t.Fatalf("the fragment is %d bytes: it would be read with one GET", frag.Bytes)
	}
	for _, cut := range [][]byte{data[:len(data)/2], data[len(data)/2:], data[:len(data)-1]} {
		scanFindsCorrupt(t, b, s, frag.Key, cut, fmt.Sprintf("a fragment of %d of its %d bytes", len(cut), len(data)))
	}
}
