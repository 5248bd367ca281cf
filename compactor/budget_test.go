package compactor_test

import (
	"errors"
	"os"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/value"
)

// budgetTable: 100 fragments of 200 rollout rows (about 24 MB, more than
// the smallest budget), every third with a deletion vector, so that both
// paths of a copy run: pages copied, and rows decoded.
func budgetTable(t *testing.T, u string) blob.Bucket {
	t.Helper()
	b := rolloutsTable(t, u, 0, 100, 200)
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i += 3 {
		if _, _, err := tb.Delete(ctx, expr.Eq("step", value.Int(int64(i*200+7)))); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// A compaction holds no more than its memory budget at once, by its own
// count of what it holds (Result.PeakMemory), whether it copies pages or
// decodes rows, and however much the bin it writes weighs; the rows come
// out the same.
func TestVolumeCompactionHoldsToItsMemoryBudget(t *testing.T) {
	src := t.TempDir()
	budgetTable(t, "file://"+src)
	for _, recode := range []bool{false, true} {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		b, err := blob.Open(ctx, "file://"+dir)
		if err != nil {
			t.Fatal(err)
		}
		before := digest(t, b)
		opts := &compactor.Options{MemoryBudget: compactor.MinMemoryBudget, Recode: recode}
		res, err := compactor.Compact(ctx, b, &compactor.Policy{}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.FragmentsBefore != 100 || res.FragmentsAfter != 1 || res.BytesRewritten <= compactor.MinMemoryBudget {
			t.Fatalf("recode %v: result %+v: want 100 fragments of more than the budget into one", recode, res)
		}
		if res.PeakMemory <= 0 || res.PeakMemory > compactor.MinMemoryBudget {
			t.Fatalf("recode %v: held %d bytes at once, over the budget of %d", recode, res.PeakMemory, compactor.MinMemoryBudget)
		}
		sameRows(t, before, digest(t, b), "compaction within the budget")
	}
}

// A source heavier than the whole budget is read alone, past the budget,
// rather than never: the run ends, and says it held more.
func TestASourceOverTheBudgetIsReadAlone(t *testing.T) {
	b := mixedTable(t, "file://"+t.TempDir()) // one fragment over 4 MiB, in one row group
	before := digest(t, b)
	res, err := compactor.Compact(ctx, b, &compactor.Policy{}, &compactor.Options{MemoryBudget: compactor.MinMemoryBudget})
	if err != nil {
		t.Fatal(err)
	}
	if res.FragmentsAfter != 1 || res.PeakMemory <= compactor.MinMemoryBudget {
		t.Fatalf("result %+v: want one fragment, and more than the budget held", res)
	}
	sameRows(t, before, digest(t, b), "compaction past the budget")
}

func TestAMemoryBudgetBelowTheLeastIsRefused(t *testing.T) {
	for _, n := range []int64{-1, 1, compactor.MinMemoryBudget - 1} {
		err := (&compactor.Options{MemoryBudget: n}).Validate()
		if !errors.Is(err, compactor.ErrInvalidOptions) {
			t.Errorf("MemoryBudget %d: %v, want ErrInvalidOptions", n, err)
		}
	}
	if err := (&compactor.Options{MemoryBudget: compactor.MinMemoryBudget}).Validate(); err != nil {
		t.Error(err)
	}
}
