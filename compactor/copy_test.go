package compactor_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/table/value"
)

// mixedTable: 30 small fragments, one over 4 MiB (read by ranges, several
// row groups), and deletes that leave some fragments with deletion vectors.
func mixedTable(t *testing.T, u string) blob.Bucket {
	t.Helper()
	b := rolloutsTable(t, u, 0, 30, 50)
	appendRollouts(t, b, 1, 0, 1, 6000)
	appendRollouts(t, b, 2, 0, 5, 40)
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Rows 0..29 of worker 0 (the first fragment whole), 75..84 (parts of
	// two fragments) and every 7th of worker 2's.
	for _, p := range []expr.Predicate{
		expr.And(expr.Eq("worker", value.String("w00")), expr.Lt("step", value.Int(30))),
		expr.And(expr.Eq("worker", value.String("w00")), expr.Ge("step", value.Int(75)), expr.Lt("step", value.Int(85))),
		expr.And(expr.Eq("worker", value.String("w02")), expr.Lt("step", value.Int(200)), expr.Gt("reward", value.Float(0.8))),
	} {
		if _, _, err := tb.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	var dvs, large int
	for _, f := range open(t, b).Manifest().Fragments {
		if f.Deletion != nil {
			dvs++
		}
		if f.Bytes > 4<<20 {
			large++
		}
	}
	if dvs < 3 || large != 1 {
		t.Fatalf("%d fragments with deletion vectors, %d over 4 MiB", dvs, large)
	}
	return b
}

// A compaction that copies pages leaves the very rows, statistics and
// filter results a decoding one does, in row groups no larger than a
// decoding one's, on a folder and on MinIO.
func copiedEqualsRecoded(t *testing.T, u1, u2 string) {
	copied, recoded := mixedTable(t, u1), mixedTable(t, u2)
	before := digest(t, copied)
	cres, err := compactor.Compact(ctx, copied, &compactor.Policy{MinFragments: 2}, nil)
	if err != nil || cres.BinsCopied != 1 || cres.FragmentsAfter != 1 {
		t.Fatalf("copying compaction: %+v, %v", cres, err)
	}
	rres, err := compactor.Compact(ctx, recoded, &compactor.Policy{MinFragments: 2}, &compactor.Options{Recode: true})
	if err != nil || rres.BinsCopied != 0 || rres.FragmentsAfter != 1 {
		t.Fatalf("decoding compaction: %+v, %v", rres, err)
	}
	sameRows(t, before, digest(t, copied), "a copying compaction")
	sameRows(t, before, digest(t, recoded), "a decoding compaction")
	cs, rs := open(t, copied), open(t, recoded)
	cf, rf := cs.Manifest().Fragments[0], rs.Manifest().Fragments[0]
	if cf.Rows != rf.Rows || cf.Deletion != nil {
		t.Fatalf("copied fragment %+v, decoded %+v", cf, rf)
	}
	if !reflect.DeepEqual(cf.Columns, rf.Columns) {
		t.Fatalf("manifest statistics differ:\ncopied  %+v\ndecoded %+v", cf.Columns, rf.Columns)
	}
	for _, p := range []expr.Predicate{
		expr.Ge("reward", value.Float(0.9)),
		expr.And(expr.Eq("worker", value.String("w01")), expr.Lt("step", value.Int(100))),
		expr.Gt("id", value.Int(2_000_000_000)),
		expr.Lt("step", value.Int(0)),
	} {
		c, r := count(t, cs, p), count(t, rs, p)
		if c != r {
			t.Fatalf("%v: %d rows in the copied fragment, %d in the decoded one", p, c, r)
		}
	}
	md := footer(t, copied, cf.Key)
	var rows int64
	for i := range md.NumRowGroups() {
		rg := md.RowGroup(i)
		rows += rg.NumRows()
		if rg.NumRows() > fragment.RowGroupRows {
			t.Fatalf("row group %d holds %d rows", i, rg.NumRows())
		}
		for c := range rg.NumColumns() {
			col, _ := rg.ColumnChunk(c)
			if st, err := col.Statistics(); err != nil || st == nil || !st.HasNullCount() {
				t.Fatalf("row group %d column %d: statistics %v, %v", i, c, st, err)
			}
		}
	}
	if rows != cf.Rows || md.NumRowGroups() > footer(t, recoded, rf.Key).NumRowGroups()+1 {
		t.Fatalf("%d rows in %d row groups", rows, md.NumRowGroups())
	}
}

func TestVolumeCopiedCompactionEqualsDecodedFile(t *testing.T) {
	copiedEqualsRecoded(t, "file://"+t.TempDir(), "file://"+t.TempDir())
}

func TestVolumeCopiedCompactionEqualsDecodedMinIO(t *testing.T) {
	m := testenv.MinIO(t)
	copiedEqualsRecoded(t, m.URL(t), m.URL(t))
}

func open(t *testing.T, b blob.Bucket) *table.Snapshot {
	t.Helper()
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func count(t *testing.T, s *table.Snapshot, p expr.Predicate) int64 {
	t.Helper()
	var n int64
	for rec, err := range s.Scan(ctx, table.ScanOptions{Filter: p, Columns: []string{"id"}}) {
		if err != nil {
			t.Fatal(err)
		}
		n += rec.NumRows()
	}
	return n
}

func footer(t *testing.T, b blob.Bucket, key string) *metadata.FileMetaData {
	t.Helper()
	data, err := b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	r, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return r.MetaData()
}

// A page damaged in a source fails the copy with a CorruptError naming
// the source, and nothing is committed.
func TestCopyRefusesADamagedPage(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 6, 50)
	s := open(t, b)
	victim := s.Manifest().Fragments[3]
	data, err := b.Get(ctx, victim.Key)
	if err != nil {
		t.Fatal(err)
	}
	md := footer(t, b, victim.Key)
	col, _ := md.RowGroup(0).ColumnChunk(md.Schema.ColumnIndexByName("artifact"))
	data[col.DataPageOffset()+col.TotalCompressedSize()/2] ^= 0x5a
	if err := b.Put(ctx, victim.Key, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	_, err = s.CopyFragments(ctx, nil, table.CopyOptions{})
	var ce *format.CorruptError
	if !errors.As(err, &ce) || ce.Key != victim.Key {
		t.Fatalf("copy over a damaged page: %v, want a CorruptError naming %s", err, victim.Key)
	}
	res, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil)
	if !errors.As(err, &ce) || ce.Key != victim.Key || res.Version != 0 {
		t.Fatalf("compaction over a damaged page: %+v, %v", res, err)
	}
	if open(t, b).Version() != s.Version() {
		t.Fatal("a failed compaction committed")
	}
}

// Fragments another writer made — another codec, dictionary pages — are
// not copied: the compaction decodes the bin and loses nothing.
func TestFragmentsOfAnotherLayoutAreDecoded(t *testing.T) {
	for name, props := range map[string]*parquet.WriterProperties{
		"snappy":     parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy), parquet.WithStats(true)),
		"dictionary": parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithDictionaryDefault(true), parquet.WithStats(true)),
	} {
		t.Run(name, func(t *testing.T) {
			b := rolloutsTable(t, "mem://", 0, 4, 50)
			s := open(t, b)
			// A fragment written by another Parquet writer, committed with
			// the statistics a fragment of the table's own would carry.
			rec := rollouts.Batch(testenv.Allocator(t), 42, 5, 0, 70)
			defer rec.Release()
			var buf bytes.Buffer
			testenv.WriteParquet(t, &buf, rec, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(memory.DefaultAllocator)))
			scratch, err := blob.Open(ctx, "mem://")
			if err != nil {
				t.Fatal(err)
			}
			own, err := fragment.Write(ctx, scratch, rollouts.Schema, rec)
			if err != nil {
				t.Fatal(err)
			}
			key := format.NewFragmentKey()
			if err := b.Put(ctx, key, bytes.NewReader(buf.Bytes())); err != nil {
				t.Fatal(err)
			}
			f := format.Fragment{Key: key, Rows: 70, Bytes: int64(buf.Len()), Columns: own.Columns, Created: own.Created}
			if _, err := commit.Commit(ctx, b, s.Manifest(), format.Transaction{Kind: format.KindAppend, Added: []format.Fragment{f}}, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := open(t, b).CopyFragments(ctx, nil, table.CopyOptions{}); !errors.Is(err, table.ErrNotCopyable) {
				t.Fatalf("copy: %v, want ErrNotCopyable", err)
			}
			before := digest(t, b)
			res, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil)
			if err != nil || res.BinsCopied != 0 || res.RowsAfter != 270 {
				t.Fatalf("compaction: %+v, %v", res, err)
			}
			sameRows(t, before, digest(t, b), "a compaction over another writer's fragment")
		})
	}
}

// Statistics that some sources lack — values over Parquet's statistics
// size, a float column of NaNs only, a column of nulls only — are left
// out of the copy rather than narrowed to the sources that have them: a
// filter finds the same rows before the compaction, after a copying one
// and after a decoding one.
func TestCopiedStatisticsAreNeverNarrowerThanTheRows(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	batch := func(from int64, x func(i int64) (float64, bool), s func(i int64) (string, bool)) arrow.RecordBatch {
		b := array.NewRecordBuilder(testenv.Allocator(t), schema)
		defer b.Release()
		for i := from; i < from+20; i++ {
			b.Field(0).(*array.Int64Builder).Append(i)
			if v, ok := x(i); ok {
				b.Field(1).(*array.Float64Builder).Append(v)
			} else {
				b.Field(1).AppendNull()
			}
			if v, ok := s(i); ok {
				b.Field(2).(*array.StringBuilder).Append(v)
			} else {
				b.Field(2).AppendNull()
			}
		}
		return b.NewRecordBatch()
	}
	long := strings.Repeat("z", 5000)
	batches := []arrow.RecordBatch{
		batch(0, func(int64) (float64, bool) { return math.NaN(), true }, func(i int64) (string, bool) { return long + fmt.Sprint(i), true }),
		batch(20, func(i int64) (float64, bool) { return float64(i), true }, func(i int64) (string, bool) { return fmt.Sprintf("m%03d", i), true }),
		batch(40, func(int64) (float64, bool) { return 0, false }, func(int64) (string, bool) { return "", false }),
		batch(60, func(i int64) (float64, bool) { return float64(i), i%2 == 0 }, func(i int64) (string, bool) { return "a" + long, i%3 == 0 }),
	}
	preds := []expr.Predicate{
		expr.Gt("x", value.Float(30)), expr.Lt("x", value.Float(25)), expr.Eq("x", value.Float(62)),
		expr.Gt("s", value.String("y")), expr.Lt("s", value.String("m")), expr.Eq("s", value.String("m025")),
	}
	counts := func(b blob.Bucket) []int64 {
		var out []int64
		s := open(t, b)
		for _, p := range preds {
			out = append(out, count(t, s, p))
		}
		return out
	}
	var want []int64
	for _, opts := range []*compactor.Options{nil, {Recode: true}} {
		b, err := blob.Open(ctx, "mem://")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := commit.Create(ctx, b, schema, nil, nil); err != nil {
			t.Fatal(err)
		}
		tb, err := commit.OpenTable(ctx, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range batches {
			if _, err := tb.Append(ctx, rec); err != nil {
				t.Fatal(err)
			}
		}
		if want == nil {
			want = counts(b)
		}
		res, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, opts)
		if err != nil || res.FragmentsAfter != 1 || res.BinsCopied != map[bool]int{true: 0, false: 1}[opts != nil] {
			t.Fatalf("compaction %+v: %+v, %v", opts, res, err)
		}
		if got := counts(b); !reflect.DeepEqual(got, want) {
			t.Fatalf("compaction %+v: filters count %v, before %v", opts, got, want)
		}
	}
	for _, rec := range batches {
		rec.Release()
	}
}

// Damage anywhere in a source's footer — a byte flipped at each of 300
// places in its last 2 KiB — is an error of the copy or a copy of the
// rows, never a panic.
func TestCopySurvivesADamagedFooter(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 3, 20)
	s := open(t, b)
	victim := s.Manifest().Fragments[1]
	data, err := b.Get(ctx, victim.Key)
	if err != nil {
		t.Fatal(err)
	}
	start := max(len(data)-2048, 4)
	step := max((len(data)-start)/300, 1)
	refused := 0
	for at := start; at < len(data); at += step {
		d := bytes.Clone(data)
		d[at] ^= 0x5a
		if err := b.Put(ctx, victim.Key, bytes.NewReader(d)); err != nil {
			t.Fatal(err)
		}
		f, err := s.CopyFragments(ctx, nil, table.CopyOptions{})
		if err == nil && f.Rows != 60 {
			t.Fatalf("byte %d flipped: copied %d rows", at, f.Rows)
		}
		if err != nil {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("no damage was noticed")
	}
	t.Logf("%d of %d damaged footers refused", refused, (len(data)-start+step-1)/step)
}
