package table_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	mrand "math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/semaphore"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// budget is a Memory of size bytes that grants a larger request alone,
// and records what it granted.
type budget struct {
	sem  *semaphore.Weighted
	size int64
	mu   sync.Mutex
	held int64
	peak int64
	got  []int64
}

func newBudget(size int64) *budget { return &budget{sem: semaphore.NewWeighted(size), size: size} }

func (b *budget) Reserve(ctx context.Context, n int64) error {
	if err := b.sem.Acquire(ctx, min(n, b.size)); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held += min(n, b.size)
	b.peak = max(b.peak, b.held)
	b.got = append(b.got, n)
	return nil
}

func (b *budget) Release(n int64) {
	b.mu.Lock()
	b.held -= min(n, b.size)
	b.mu.Unlock()
	b.sem.Release(min(n, b.size))
}

func (b *budget) stats() (held, peak int64, got []int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held, b.peak, append([]int64(nil), b.got...)
}

// rolloutsTable appends one fragment of the benchmark's rows per count.
func rolloutsTable(t *testing.T, counts ...int) (blob.Bucket, *table.Snapshot) {
	t.Helper()
	mem, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	b, tb := openRolloutsTable(t, mem)
	var id int64
	for _, n := range counts {
		appendRollouts(t, tb, 0, id, n)
		id += int64(n)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b, s
}

// scanRows counts the rows a scan yields, stopping after stop batches
// (0: never); its error is returned.
func scanRows(s *table.Snapshot, opts table.ScanOptions, stop int) (int64, error) {
	var n int64
	batches := 0
	for rec, err := range s.Scan(ctx, opts) {
		if err != nil {
			return n, err
		}
		n += rec.NumRows()
		if batches++; batches == stop {
			break
		}
	}
	return n, nil
}

// A scan given a Memory budget reserves, for each fragment it reads and
// before reading it, at least the bytes it fetches, and gives every
// reservation back — at its end, when its caller stops early, and when
// it fails — reading the same rows as without one: whole (streamed),
// by ranges (a projection) and filtered.
func TestVolumeAScanReservesEachFragmentWithinItsBudget(t *testing.T) {
	// Two fragments over 4 MiB (read by ranges or streamed), four small.
	b, s := rolloutsTable(t, 5000, 300, 5000, 200, 400, 100)
	cases := []table.ScanOptions{
		{},
		{Columns: []string{"id", "artifact"}},
		{Filter: expr.Lt("id", value.Int(5300))},
		{Parallelism: 1, BatchSize: 100},
	}
	for _, opts := range cases {
		want, err := scanRows(s, opts, 0)
		if err != nil {
			t.Fatal(err)
		}
		m := newBudget(1 << 40)
		opts.Memory = m
		got, err := scanRows(s, opts, 0)
		if err != nil || got != want {
			t.Fatalf("%+v: %d rows, %v; want %d", opts, got, err, want)
		}
		held, _, grants := m.stats()
		frags := s.Manifest().Fragments
		if opts.Filter != nil {
			frags = frags[:2] // the others are pruned by their statistics
		}
		if held != 0 || len(grants) != len(frags) {
			t.Fatalf("%+v: %d reservations (%d bytes still held); want one per fragment read (%d)", opts, len(grants), held, len(frags))
		}
		for i, f := range frags {
			if grants[i] < min(f.Bytes, 16<<20) {
				t.Errorf("%+v: fragment %d of %d bytes reserved %d", opts, i, f.Bytes, grants[i])
			}
		}
	}
	// Stopped early, and failed: nothing stays reserved.
	m := newBudget(1 << 40)
	if _, err := scanRows(s, table.ScanOptions{Memory: m, Parallelism: 3}, 1); err != nil {
		t.Fatal(err)
	}
	if held, _, _ := m.stats(); held != 0 {
		t.Fatalf("a scan stopped after one batch still holds %d bytes", held)
	}
	if err := b.Delete(ctx, s.Manifest().Fragments[3].Key); err != nil {
		t.Fatal(err)
	}
	_, err := scanRows(s, table.ScanOptions{Memory: m}, 0)
	if !errors.Is(err, format.ErrMissingData) {
		t.Fatalf("scan without a fragment: %v", err)
	}
	if held, _, _ := m.stats(); held != 0 {
		t.Fatalf("a failed scan still holds %d bytes", held)
	}
}

// bigValues is a table of (id, payload binary), one fragment per value.
func bigValues(t *testing.T, values ...[]byte) *table.Snapshot {
	t.Helper()
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "payload", Type: arrow.BinaryTypes.Binary}}, nil)
	if _, err := commit.Create(ctx, b, schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range values {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		bld.Field(0).(*array.Int64Builder).Append(int64(i))
		bld.Field(1).(*array.BinaryBuilder).Append(v)
		rec := bld.NewRecordBatch()
		bld.Release()
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A fragment is weighed by what its values decode to, read from its
// footer, not by its size: a 24 MiB value that compresses to a few KiB,
// and an 8 MiB one that does not, each reserve at least twice the value
// (its decompressed page and its batch) besides the bytes fetched.
func TestVolumeAFragmentWeighsWhatItsValuesDecodeTo(t *testing.T) {
	random := make([]byte, 8<<20)
	_, _ = rand.Read(random)
	s := bigValues(t, bytes.Repeat([]byte("x"), 24<<20), random)
	frags := s.Manifest().Fragments
	if frags[0].Bytes > 1<<20 || frags[1].Bytes < 8<<20 {
		t.Fatalf("fragments of %d and %d bytes; want a small one and one over 8 MiB", frags[0].Bytes, frags[1].Bytes)
	}
	for _, opts := range []table.ScanOptions{{}, {Columns: []string{"payload"}}} {
		m := newBudget(1 << 40)
		opts.Memory = m
		if _, err := scanRows(s, opts, 0); err != nil {
			t.Fatal(err)
		}
		_, _, got := m.stats()
		if len(got) != 2 || got[0] < 2*(24<<20) || got[1] < frags[1].Bytes+2*(8<<20) {
			t.Fatalf("%v: reserved %v for values of 24 MiB (in %d bytes) and 8 MiB (in %d bytes)", opts.Columns, got, frags[0].Bytes, frags[1].Bytes)
		}
	}
}

// Sixteen scans sharing a budget smaller than some of their fragments —
// whole, projected, filtered, stopped early, a few fragments at once —
// all end, hold no more than the budget at once (a larger fragment is
// granted alone), and give it all back.
func TestScansSharingASmallBudgetAllEnd(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := mrand.New(mrand.NewPCG(uint64(seed), 0))
	counts := make([]int, 10)
	for i := range counts {
		counts[i] = 50 + rng.IntN(4000)
	}
	_, s := rolloutsTable(t, counts...)
	var total int64
	for _, n := range counts {
		total += int64(n)
	}
	m := newBudget(6 << 20)
	type scan struct {
		opts table.ScanOptions
		stop int
	}
	scans := make([]scan, 16)
	for i := range scans {
		sc := &scans[i]
		sc.opts = table.ScanOptions{Memory: m, Parallelism: 1 + rng.IntN(4), BatchSize: 256 << rng.IntN(4)}
		switch rng.IntN(4) {
		case 1:
			sc.opts.Columns = []string{"id", "prompt"}
		case 2:
			sc.opts.Filter = expr.Ge("id", value.Int(int64(rng.IntN(int(total)))))
		case 3:
			sc.stop = 1 + rng.IntN(5)
		}
	}
	var wg sync.WaitGroup
	for i, sc := range scans {
		wg.Go(func() {
			n, err := scanRows(s, sc.opts, sc.stop)
			if err != nil {
				t.Errorf("scan %d: %v", i, err)
			}
			if sc.stop == 0 && sc.opts.Filter == nil && n != total {
				t.Errorf("scan %d: %d rows, want %d", i, n, total)
			}
		})
	}
	wg.Wait()
	held, peak, _ := m.stats()
	if held != 0 || peak > m.size {
		t.Fatalf("after the scans %d bytes are held; at most %d were, of a budget of %d", held, peak, m.size)
	}
}

// A take given a budget reads its fragments within it, as a scan does,
// and gives it all back: each fragment is reserved twice, once to find
// the keys in it, once to read their rows.
func TestATakeReadsWithinItsBudget(t *testing.T) {
	_, s := rolloutsTable(t, 300, 5000, 200)
	m := newBudget(1 << 40)
	recs, _, err := s.TakeWith(ctx, "id", value.Ints(5, 310, 5400), table.ScanOptions{Columns: []string{"id"}, Memory: m})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, rec := range recs {
		n += rec.NumRows()
		rec.Release()
	}
	held, _, got := m.stats()
	if n != 3 || len(got) != 6 || held != 0 {
		t.Fatalf("took %d rows with %d reservations, %d bytes still held; want 3 rows, two reservations per fragment, none held", n, len(got), held)
	}
}

// A caller that panics out of a scan's loop (a server cutting an answer
// short) leaves nothing of the budget reserved.
func TestACallerThatPanicsLeavesNothingReserved(t *testing.T) {
	_, s := rolloutsTable(t, 300, 5000, 200, 400)
	m := newBudget(1 << 40)
	func() {
		defer func() {
			if r := recover(); r != "cut" {
				t.Fatalf("recovered %v", r)
			}
		}()
		for _, err := range s.Scan(ctx, table.ScanOptions{Memory: m, Parallelism: 3, BatchSize: 100}) {
			if err != nil {
				t.Fatal(err)
			}
			panic("cut")
		}
	}()
	if held, _, got := m.stats(); held != 0 || len(got) == 0 {
		t.Fatalf("after a panic out of the scan, %d bytes of %d reservations are still held", held, len(got))
	}
}
