package compactor_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/value"
	"github.com/stratadb/strata/walshard"
)

var ctx = context.Background()

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// rolloutsTable appends n batches of rows rows from worker w.
func rolloutsTable(t testing.TB, u string, w, n, rows int) blob.Bucket {
	t.Helper()
	b, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	appendRollouts(t, b, w, 0, n, rows)
	return b
}

func appendRollouts(t testing.TB, b blob.Bucket, w, from, n, rows int) {
	t.Helper()
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Error(err)
		return
	}
	for i := from; i < from+n; i++ {
		rec := rollouts.Batch(testenv.Allocator(t), 42, w, int64(i*rows), rows)
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Error(err)
		}
		rec.Release()
	}
}

// sameRows fails unless after holds exactly the rows of before, byte for
// byte.
func sameRows(t *testing.T, before, after map[int64][32]byte, what string) {
	t.Helper()
	if len(after) != len(before) {
		t.Fatalf("%d rows after %s, %d before", len(after), what, len(before))
	}
	for id, h := range before {
		if after[id] != h {
			t.Fatalf("row %d changed in %s", id, what)
		}
	}
}

// digest returns, per id, the SHA-256 of the row's logical bytes, and
// fails on a repeated id.
func digest(t *testing.T, b blob.Bucket) map[int64][32]byte {
	t.Helper()
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][32]byte{}
	for rec, err := range s.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rollouts.RowsOf(rec) {
			if _, dup := out[r.ID]; dup {
				t.Fatalf("id %d appears twice", r.ID)
			}
			h := sha256.New()
			fmt.Fprintf(h, "%d|%s|%d|%d|%v|%s|", r.ID, r.Worker, r.Step, r.TS, r.Reward, r.Prompt)
			h.Write(r.Artifact)
			out[r.ID] = [32]byte(h.Sum(nil))
		}
	}
	return out
}

func conserves(t *testing.T, u string) {
	b := rolloutsTable(t, u, 0, 30, 50)
	before := digest(t, b)
	res, err := compactor.Compact(ctx, b, &compactor.Policy{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.FragmentsBefore != 30 || res.FragmentsAfter != 1 || res.RowsBefore != 1500 || res.RowsAfter != 1500 {
		t.Fatalf("result %+v", res)
	}
	sameRows(t, before, digest(t, b), "compaction")
	// Nothing left to do: a second run plans nothing.
	res, err = compactor.Compact(ctx, b, &compactor.Policy{}, nil)
	if err != nil || len(res.Plan.Bins) != 0 || res.Version != 0 {
		t.Fatalf("second run %+v, %v", res, err)
	}
}

func TestCompactionConservesRowsAndBlobsFile(t *testing.T) { conserves(t, "file://"+t.TempDir()) }
func TestCompactionConservesRowsAndBlobsMinIO(t *testing.T) {
	conserves(t, testenv.MinIO(t).URL(t))
}

func TestCompactionDropsDeletedRows(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 6, 20)
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, n, err := tb.Delete(ctx, expr.Lt("step", value.Int(30))); err != nil || n != 30 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	res, err := compactor.Compact(ctx, b, &compactor.Policy{}, nil)
	if err != nil || res.RowsAfter != 90 || res.FragmentsAfter != 1 {
		t.Fatalf("compaction over deletes: %+v, %v", res, err)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f := s.Manifest().Fragments[0]; f.Deletion != nil || f.Rows != 90 {
		t.Fatalf("compacted fragment %+v", f)
	}
}

// Direct appends from other writers and a shard merge land while
// compactions run back to back: nothing fails, nothing is lost or doubled.
func concurrent(t *testing.T, u string) {
	b := rolloutsTable(t, u, 0, 20, 20)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := 1; w <= 2; w++ {
		wg.Go(func() { appendRollouts(t, b, w, 0, 15, 20) })
	}
	wg.Go(func() {
		s, err := walshard.Open(ctx, b, &walshard.Options{Shard: "s1"})
		if err != nil {
			t.Error(err)
			return
		}
		defer s.Close()
		for i := range 10 {
			rec := rollouts.Batch(testenv.Allocator(t), 42, 3, int64(i*20), 20)
			if err := s.Append(ctx, rec); err != nil {
				t.Error(err)
			}
			rec.Release()
			if i%3 == 2 {
				if _, err := s.Flush(ctx); err != nil {
					t.Error(err)
				}
				if _, err := s.Merge(ctx); err != nil {
					t.Error(err)
				}
			}
		}
		_, _ = s.Flush(ctx)
		if _, err := s.Merge(ctx); err != nil {
			t.Error(err)
		}
	})
	runs := 0
	cerr := make(chan error, 1)
	go func() {
		defer close(cerr)
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil); err != nil {
				cerr <- err
				return
			}
			runs++
		}
	}()
	wg.Wait()
	close(done)
	if err := <-cerr; err != nil {
		t.Fatalf("compaction during appends: %v", err)
	}
	got := digest(t, b)
	want := 20*20 + 2*15*20 + 10*20
	if len(got) != want {
		t.Fatalf("%d rows, want %d", len(got), want)
	}
	t.Logf("%d compactions ran alongside appends and merges; %d rows", runs, len(got))
}

func TestCompactionWithConcurrentAppendsAndMergesFile(t *testing.T) {
	concurrent(t, "file://"+t.TempDir())
}
func TestCompactionWithConcurrentAppendsAndMergesMinIO(t *testing.T) {
	concurrent(t, testenv.MinIO(t).URL(t))
}

// Two compactors over the same fragments: one wins, the other plans again
// (and finds little or nothing left) or stops with a conflict; no row is
// lost or doubled either way.
func TestTwoCompactorsAtOnce(t *testing.T) {
	b := rolloutsTable(t, testenv.MinIO(t).URL(t), 0, 24, 20)
	before := digest(t, b)
	var wg sync.WaitGroup
	results := make([]compactor.Result, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			results[i], errs[i] = compactor.Compact(ctx, b, &compactor.Policy{}, &compactor.Options{Leased: true})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, commit.ErrConflict) {
			t.Fatalf("compactor %d: %v", i, err)
		}
	}
	committed := 0
	for _, r := range results {
		if r.Version != 0 {
			committed++
		}
	}
	if committed == 0 {
		t.Fatalf("neither compactor committed: %+v %v", results, errs)
	}
	after := digest(t, b)
	if len(after) != len(before) {
		t.Fatalf("%d rows after, %d before", len(after), len(before))
	}
	t.Logf("results: %+v / %+v; errors %v", results[0].Replans, results[1].Replans, errs)
}

// Three parts of a split compaction run at once on one table, each under
// its own lease: each commits its own bins, none plans again (the bins
// are disjoint), every row stays once and unchanged, and nothing is left
// to compact.
func TestPartsCompactOneTableAtOnce(t *testing.T) {
	b := rolloutsTable(t, testenv.MinIO(t).URL(t), 0, 120, 20)
	before := digest(t, b)
	const parts = 3
	var wg sync.WaitGroup
	results := make([]compactor.Result, parts)
	errs := make([]error, parts)
	for i := range parts {
		wg.Go(func() {
			p := compactor.Policy{TargetRows: 200, Part: compactor.Part{Index: i, Of: parts}}
			results[i], errs[i] = compactor.Compact(ctx, b, &p, &compactor.Options{Holder: fmt.Sprintf("part-%d", i)})
		})
	}
	wg.Wait()
	bins := 0
	for i, r := range results {
		if errs[i] != nil || r.Version == 0 || r.Replans != 0 {
			t.Fatalf("part %d: version %d, %d re-plans, %v", i, r.Version, r.Replans, errs[i])
		}
		bins += len(r.Plan.Bins)
	}
	sameRows(t, before, digest(t, b), "three parts' compactions")
	res, err := compactor.Compact(ctx, b, &compactor.Policy{TargetRows: 200}, nil)
	if err != nil || len(res.Plan.Bins) != 0 || res.FragmentsBefore != bins {
		t.Fatalf("after the parts (%d bins): %d fragments, a whole-table plan of %d bins, %v", bins, res.FragmentsBefore, len(res.Plan.Bins), err)
	}
}
