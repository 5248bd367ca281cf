package commit_test

import (
	"errors"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
)

// A writer uploads its fragment, then stalls so long that garbage
// collection, seeing an old unreferenced object, deletes it before the
// writer's manifest lands. The commit must not be acknowledged with the
// data gone: it removes the dangling fragment again, and Append writes the
// rows anew. Here the clock is moved ten minutes on, and the "collector"
// deletes data objects when the first manifest create arrives.
func TestAStallPastGCDoesNotLoseAnAcknowledgedAppend(t *testing.T) {
	under := open(t, "mem://")
	createIDTable(t, under)
	var fired atomic.Bool
	collector := fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if op == fault.OpPutIfAbsent && strings.HasPrefix(key, "_versions/") && fired.CompareAndSwap(false, true) {
			for o, err := range blob.List(ctx, under, "data/", 0) {
				if err == nil {
					_ = under.Delete(ctx, o.Key)
				}
			}
		}
		return fault.Fault{}
	})
	f := fault.Wrap(under, fault.OnKeys(regexp.MustCompile(`.`), collector))
	later := func() time.Time { return time.Now().Add(10 * time.Minute) }
	tb, err := commit.OpenTable(ctx, f, &commit.Options{Now: later})
	if err != nil {
		t.Fatal(err)
	}
	rec := idBatch(7, 8, 9)
	defer rec.Release()
	res, err := tb.Append(ctx, rec)
	if err != nil {
		t.Fatalf("append across a stall: %v", err)
	}
	if !fired.Load() {
		t.Fatal("the collector never ran")
	}
	// v2: the append whose fragment vanished; v3: its removal; v4: the
	// append again, with a fragment written anew.
	if res.Version != 4 {
		t.Fatalf("landed at v%d, want v4", res.Version)
	}
	s, err := table.Open(ctx, under, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rec, err := range s.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatalf("scan after the repair: %v", err)
		}
		ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
	}
	if len(ids) != 3 {
		t.Fatalf("rows %v, want 7, 8, 9 once", ids)
	}
	v3, _ := table.ReadManifest(ctx, under, 3)
	if v3.Transaction.Kind != table.KindRewrite || len(v3.Fragments) != 0 {
		t.Fatalf("v3 should remove the lost fragment: %+v", v3.Transaction)
	}
}

// The same stall under a compaction: its outputs are gone, so the Rewrite
// is undone — the sources it removed come back — and no row is lost.
func TestAStalledRewriteWhoseOutputsGCTookIsUndone(t *testing.T) {
	b := open(t, "mem://")
	createIDTable(t, b)
	tb, _ := commit.OpenTable(ctx, b, nil)
	for i := range 4 {
		rec := idBatch(int64(i))
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	s, _ := table.Open(ctx, b, nil)
	var ids []uint64
	var recs []arrow.RecordBatch
	for _, f := range s.Manifest().Fragments {
		ids = append(ids, f.ID)
	}
	for rec, err := range s.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	out, err := table.WriteFragment(ctx, b, idSchema, recs...)
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Delete(ctx, out.Key) // the collector took the output during the stall
	_, err = commit.Commit(ctx, b, s.Manifest(), table.Transaction{Kind: table.KindRewrite, Removed: ids, Added: []table.Fragment{out}},
		&commit.Options{Now: func() time.Time { return time.Now().Add(10 * time.Minute) }})
	var ce *commit.ConflictError
	if !errors.As(err, &ce) || !ce.LostData {
		t.Fatalf("stalled rewrite: %v, want a lost-data conflict", err)
	}
	after, _ := table.Open(ctx, b, nil)
	var got []int64
	for rec, err := range after.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatalf("scan after the undo: %v", err)
		}
		got = append(got, rec.Column(0).(*array.Int64).Int64Values()...)
	}
	if len(got) != 4 || len(after.Manifest().Fragments) != 4 {
		t.Fatalf("after the undo: rows %v in %d fragments", got, len(after.Manifest().Fragments))
	}
}
