package walshard_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
	"github.com/stratadb/strata/table/value"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/wal"
)

var ctx = context.Background()

func TestMain(m *testing.M) {
	registerKillChild()
	os.Exit(testenv.Main(m))
}

var schema = arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "shard", Type: arrow.BinaryTypes.String}}, nil)

func batch(shard string, ids ...int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(testenv.Arrow, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
	for range ids {
		b.Field(1).(*array.StringBuilder).Append(shard)
	}
	return b.NewRecordBatch()
}

func newTable(t testing.TB, u string) blob.Bucket {
	t.Helper()
	b, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commit.Create(ctx, b, schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	return b
}

func open(t testing.TB, b blob.Bucket, id string, o walshard.Options) *walshard.Shard {
	t.Helper()
	o.Shard = id
	s, err := walshard.Open(ctx, b, &o)
	if err != nil {
		t.Fatalf("open shard %s: %v", id, err)
	}
	return s
}

func appendIDs(t testing.TB, s *walshard.Shard, ids ...int64) {
	t.Helper()
	rec := batch(s.ID(), ids...)
	defer rec.Release()
	if err := s.Append(ctx, rec); err != nil {
		t.Fatalf("append %v: %v", ids, err)
	}
}

// appendOnce appends one batch of ids and releases it.
func appendOnce(s *walshard.Shard, shard string, ids ...int64) error {
	rec := batch(shard, ids...)
	defer rec.Release()
	return s.Append(ctx, rec)
}

// countIDs counts each id in a scan.
func countIDs(t testing.TB, seq func(yield func(arrow.RecordBatch, error) bool)) map[int64]int {
	t.Helper()
	seen := map[int64]int{}
	for rec, err := range seq {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		for _, id := range rec.Column(0).(*array.Int64).Int64Values() {
			seen[id]++
		}
	}
	return seen
}

func baseIDs(t testing.TB, b blob.Bucket) map[int64]int {
	t.Helper()
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return countIDs(t, s.Scan(ctx, table.ScanOptions{}))
}

func exactlyOnce(t testing.TB, seen map[int64]int, want []int64) {
	t.Helper()
	for _, id := range want {
		if seen[id] != 1 {
			t.Fatalf("id %d seen %d times", id, seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("%d distinct ids, want %d", len(seen), len(want))
	}
}

func seq(from, n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)
	}
	return out
}

func TestAppendFlushMergeMovesRowsIntoTheTableOnce(t *testing.T) {
	b := newTable(t, "mem://")
	var commits atomic.Int64
	s := open(t, b, "w1", walshard.Options{Listener: walshard.Listener{CommitEnd: func(d time.Duration, err error) {
		if err == nil && d > 0 {
			commits.Add(1)
		}
	}}})
	defer s.Close()
	appendIDs(t, s, seq(0, 10)...)
	appendIDs(t, s, seq(10, 10)...)
	exactlyOnce(t, countIDs(t, s.ScanFresh(ctx, table.ScanOptions{})), seq(0, 20))
	if gen, err := s.Flush(ctx); err != nil || gen != 1 {
		t.Fatalf("Flush = %d, %v", gen, err)
	}
	appendIDs(t, s, seq(20, 5)...)
	exactlyOnce(t, countIDs(t, s.ScanFresh(ctx, table.ScanOptions{})), seq(0, 25))
	st := s.Stats()
	if st.PendingGenerations != 1 || st.PendingRows != 20 || st.MemtableRows != 5 || st.WALLag == 0 {
		t.Fatalf("stats %+v", st)
	}
	res, err := s.Merge(ctx)
	if err != nil || res.Rows != 20 || res.Watermark != 1 || commits.Load() != 1 {
		t.Fatalf("Merge = %+v, %v; %d commits observed", res, err, commits.Load())
	}
	exactlyOnce(t, baseIDs(t, b), seq(0, 20))
	exactlyOnce(t, countIDs(t, s.ScanFresh(ctx, table.ScanOptions{})), seq(0, 25))
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Shards["w1"].Watermark != 1 || m.Transaction.Kind != format.KindMerge {
		t.Fatalf("manifest shard mark %+v, kind %s", m.Shards, m.Transaction.Kind)
	}
	// The merged generation's rows are a table fragment now, copied from
	// the flush object that held them (and named as a generation of the
	// shard); the WAL entries it covered are gone, the one for ids 20..24
	// stays.
	if !strings.HasPrefix(m.Fragments[0].Key, "_shards/w1/gen/") || len(m.Fragments) != 1 || m.Fragments[0].Rows != 20 {
		t.Fatalf("fragments %+v", m.Fragments)
	}
	var wal []string
	for o, err := range blob.List(ctx, b, "_shards/w1/wal/", 0) {
		if err != nil {
			t.Fatal(err)
		}
		wal = append(wal, o.Key)
	}
	// Positions: 1 the fence (kept a while: a paused older owner would
	// write there next), 2 and 3 the merged rows, 4 ids 20..24.
	if len(wal) != 2 || wal[0] != "_shards/w1/wal/18446744073709551611" || wal[1] != "_shards/w1/wal/18446744073709551614" {
		t.Fatalf("WAL after merge: %q, want positions 4 and 1", wal)
	}
	st = s.Stats()
	if st.PendingGenerations != 0 || st.Watermark != 1 {
		t.Fatalf("stats after merge %+v", st)
	}
	// A filter and a projection through the fresh path.
	got := countIDs(t, s.ScanFresh(ctx, table.ScanOptions{Columns: []string{"id"}, Filter: expr.Ge("id", value.Int(18))}))
	exactlyOnce(t, got, seq(18, 7))
}

func TestConcurrentAppendsShareWALEntries(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "w1", walshard.Options{GroupWait: 5 * time.Millisecond})
	defer s.Close()
	before, _ := blob.StatsOf(b)
	var wg sync.WaitGroup
	for g := range 50 {
		wg.Go(func() { appendIDs(t, s, int64(g)) })
	}
	wg.Wait()
	after, _ := blob.StatsOf(b)
	entries := after.Sub(before).CondPutsWon
	if entries >= 25 {
		t.Fatalf("50 concurrent appends made %d WAL entries; group commit should share them", entries)
	}
	t.Logf("50 concurrent appends: %d WAL entries", entries)
	exactlyOnce(t, countIDs(t, s.ScanFresh(ctx, table.ScanOptions{})), seq(0, 50))
}

func TestReopenReplaysWhatWasNotFlushed(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "w1", walshard.Options{})
	appendIDs(t, s, seq(0, 5)...)
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	appendIDs(t, s, seq(5, 5)...)
	s.Close() // no flush: ids 5..9 only in the WAL
	s2 := open(t, b, "w1", walshard.Options{})
	defer s2.Close()
	if st := s2.Stats(); st.MemtableRows != 5 || st.PendingGenerations != 1 || st.Epoch != 2 {
		t.Fatalf("after reopen: %+v", st)
	}
	exactlyOnce(t, countIDs(t, s2.ScanFresh(ctx, table.ScanOptions{})), seq(0, 10))
	if _, err := s2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, b), seq(0, 10))
	// And once more: a reopen after everything merged replays nothing.
	s2.Close()
	s3 := open(t, b, "w1", walshard.Options{})
	defer s3.Close()
	if st := s3.Stats(); st.MemtableRows != 0 || st.PendingGenerations != 0 {
		t.Fatalf("after merge and reopen: %+v", st)
	}
	if res, err := s3.Merge(ctx); err != nil || res.Rows != 0 {
		t.Fatalf("second merge: %+v %v", res, err)
	}
	exactlyOnce(t, baseIDs(t, b), seq(0, 10))
}

func TestAFencedWriterCanDoNoHarm(t *testing.T) {
	b := newTable(t, "mem://")
	old := open(t, b, "w1", walshard.Options{})
	defer old.Close()
	appendIDs(t, old, 1, 2)
	if _, err := old.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	appendIDs(t, old, 3) // acknowledged, only in the WAL
	newer := open(t, b, "w1", walshard.Options{})
	defer newer.Close()

	rec := batch("w1", 100)
	defer rec.Release()
	if err := old.Append(ctx, rec); !errors.Is(err, walshard.ErrFenced) {
		t.Fatalf("old owner's append: %v, want walshard.ErrFenced", err)
	}
	if _, err := old.Merge(ctx); !errors.Is(err, walshard.ErrFenced) {
		t.Fatalf("old owner's merge: %v, want walshard.ErrFenced", err)
	}
	if _, err := old.Flush(ctx); !errors.Is(err, walshard.ErrFenced) {
		t.Fatalf("old owner's flush: %v, want walshard.ErrFenced", err)
	}
	if _, err := newer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := newer.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, b), []int64{1, 2, 3})
}

func TestStaleMergeFromAnOlderEpochIsRefusedByTheTable(t *testing.T) {
	b := newTable(t, "mem://")
	s := open(t, b, "w1", walshard.Options{})
	defer s.Close()
	appendIDs(t, s, 1)
	_, _ = s.Flush(ctx)
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	// A merge transaction from epoch 0 (older than the table's mark).
	_, err := commit.Commit(ctx, b, nil, format.Transaction{Kind: format.KindMerge, Shard: "w1", Watermark: 9, Epoch: 0}, nil)
	if !errors.Is(err, commit.ErrConflict) || commit.IsRetryableConflict(err) {
		t.Fatalf("stale merge: %v, want a final conflict", err)
	}
}

func TestBadInput(t *testing.T) {
	b := newTable(t, "mem://")
	if _, err := walshard.Open(ctx, b, &walshard.Options{Shard: "../x"}); !errors.Is(err, wal.ErrBadShardID) {
		t.Fatalf("bad shard id: %v", err)
	}
	s := open(t, b, "w1", walshard.Options{})
	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Float64}}, nil)
	bld := array.NewRecordBuilder(testenv.Arrow, other)
	defer bld.Release()
	bld.Field(0).(*array.Float64Builder).Append(1)
	rec := bld.NewRecordBatch()
	defer rec.Release()
	before, _ := blob.StatsOf(b)
	if err := s.Append(ctx, rec); !errors.Is(err, evolve.ErrSchemaMismatch) {
		t.Fatalf("append of another schema: %v", err)
	}
	if after, _ := blob.StatsOf(b); after.Sub(before).CondPutsWon != 0 {
		t.Fatal("a refused append wrote a WAL entry")
	}
	appendIDs(t, s, 1)
	appendIDs(t, s, 2)
	s.Close()
	// Damage the newest data entry: reopening must refuse, naming it.
	var victim string
	for o, err := range blob.List(ctx, b, "_shards/w1/wal/", 0) {
		if err != nil {
			t.Fatal(err)
		}
		data, err := b.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 100 && victim == "" {
			victim = o.Key
			data[len(data)-3] ^= 0xff
			if err := b.Delete(ctx, o.Key); err != nil {
				t.Fatal(err)
			}
			if err := b.PutIfAbsent(ctx, o.Key, data); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, err := walshard.Open(ctx, b, &walshard.Options{Shard: "w1"})
	var ce *wal.CorruptEntryError
	if !errors.As(err, &ce) || ce.Key != victim || ce.Shard != "w1" || ce.Position == 0 {
		t.Fatalf("reopen over a corrupt entry: %v (want a CorruptEntryError naming %s)", err, victim)
	}
	if _, err := walshard.Inspect(ctx, b, "nobody"); !errors.Is(err, walshard.ErrUnknownShard) {
		t.Fatalf("Inspect of an unknown shard: %v", err)
	}
}

// Four shards append concurrently while each merges in the background; at
// the end every acknowledged row is in a fresh read, and after a final
// flush and merge in the base table, exactly once.
func fourShards(t *testing.T, u string) {
	b := newTable(t, u)
	const shards, appends, per = 4, 40, 5
	var wg sync.WaitGroup
	handles := make([]*walshard.Shard, shards)
	for i := range shards {
		handles[i] = open(t, b, fmt.Sprintf("w%d", i), walshard.Options{FlushRows: 30, MergeInterval: 20 * time.Millisecond})
	}
	for i, s := range handles {
		wg.Go(func() {
			for a := range appends {
				appendIDs(t, s, seq(int64(i*100_000+a*per), per)...)
			}
		})
	}
	wg.Wait()
	var want []int64
	for i := range shards {
		want = append(want, seq(int64(i*100_000), appends*per)...)
	}
	// Fresh read through one shard sees its own rows exactly once (others'
	// rows only as far as they are merged).
	got := countIDs(t, handles[0].ScanFresh(ctx, table.ScanOptions{}))
	for _, id := range seq(0, appends*per) {
		if got[id] != 1 {
			t.Fatalf("fresh read: id %d seen %d times", id, got[id])
		}
	}
	for _, s := range handles {
		if _, err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for {
			res, err := s.Merge(ctx)
			if errors.Is(err, walshard.ErrMergeRunning) {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Generations == 0 {
				break
			}
		}
		s.Close()
	}
	exactlyOnce(t, baseIDs(t, b), want)
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rows from %d shards in %d versions, %d fragments", m.Rows(), shards, m.Version, len(m.Fragments))
}

func TestFourShardsFile(t *testing.T)  { fourShards(t, "file://"+t.TempDir()) }
func TestFourShardsMinIO(t *testing.T) { fourShards(t, testenv.MinIO(t).URL(t)) }

// A base-table Rewrite (a compaction stand-in) and merges from shards run
// at once: neither fails, and no row is lost or doubled.
func TestRewriteAndMergeRunTogether(t *testing.T) {
	b := newTable(t, "mem://")
	direct, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		rec := batch("direct", int64(1_000_000+i))
		if _, err := direct.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	s := open(t, b, "w1", walshard.Options{})
	defer s.Close()
	var wg sync.WaitGroup
	var rewriteErr error
	wg.Go(func() {
		for range 5 {
			snap, err := table.Open(ctx, b, nil)
			if err != nil {
				t.Fatal(err)
			}
			var ids []uint64
			var recs []arrow.RecordBatch
			for _, f := range snap.Manifest().Fragments {
				ids = append(ids, f.ID)
			}
			for rec, err := range snap.Scan(ctx, table.ScanOptions{}) {
				if err != nil {
					rewriteErr = err
					return
				}
				rec.Retain()
				recs = append(recs, rec)
			}
			frag, err := fragment.Write(ctx, b, schema, recs...)
			for _, r := range recs {
				r.Release()
			}
			if err != nil {
				rewriteErr = err
				return
			}
			_, err = commit.Commit(ctx, b, snap.Manifest(), format.Transaction{Kind: format.KindRewrite, Removed: ids, Added: []format.Fragment{frag}}, nil)
			if err != nil && !commit.IsRetryableConflict(err) {
				rewriteErr = err
				return
			}
		}
	})
	for a := range 20 {
		appendIDs(t, s, int64(a))
		if a%4 == 3 {
			if _, err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Merge(ctx); err != nil {
				t.Fatalf("merge during rewrites: %v", err)
			}
		}
	}
	wg.Wait()
	if rewriteErr != nil {
		t.Fatalf("rewrite: %v", rewriteErr)
	}
	want := append(seq(0, 20), seq(1_000_000, 6)...)
	exactlyOnce(t, baseIDs(t, b), want)
}
