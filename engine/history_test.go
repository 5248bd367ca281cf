package engine_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/walshard"
)

// failLists fails every LIST of the table but the history's.
var failLists = fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
	if op != fault.OpList || strings.HasPrefix(key, "_compactor/") {
		return fault.Fault{}
	}
	return fault.Fault{Action: fault.Fail, Err: errors.New("listing refused")}
})

// status reads the table's recorded runs.
func status(t *testing.T, b blob.Bucket) compactor.Status {
	t.Helper()
	st, err := compactor.ReadStatus(ctx, b, 20)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestAFailedGCRecordsItsOwnDurationAndError(t *testing.T) {
	under, _ := blob.Open(ctx, "mem://")
	rolloutsTable(t, under, 3, 10)
	b := fault.Wrap(under, nil)
	db, err := engine.Open(ctx, b, &engine.Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b.SetInjector(failLists)
	start := time.Now()
	if _, err := db.GC(ctx, engine.GCOptions{Now: time.Now()}); err == nil {
		t.Fatal("a collection that cannot list succeeded")
	}
	took := time.Since(start)
	st := status(t, under)
	gc := st.Kinds[compactor.KindGC]
	if len(st.History) != 1 || st.History[0].Kind != compactor.KindGC || !strings.Contains(gc.LastError, "listing refused") {
		t.Fatalf("after a failed collection: kinds %+v, history %+v; want one gc run with its error", st.Kinds, st.History)
	}
	if run := st.History[0]; run.DurationS <= 0 || run.DurationS > took.Seconds() || gc.DurationS != run.DurationS {
		t.Fatalf("the failed collection's run %+v (%+v): want its duration (0 < d <= %v)", run, gc, took)
	}
	if st.LastError != "" || st.Kinds[compactor.KindCompaction].LastError != "" {
		t.Fatalf("a collection's error shows as the compaction's: %q", st.LastError)
	}
	// The next collection that succeeds clears it.
	b.SetInjector(nil)
	if _, err := db.GC(ctx, engine.GCOptions{Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	st = status(t, under)
	if gc := st.Kinds[compactor.KindGC]; gc.LastError != "" || gc.LastSuccess.IsZero() || len(st.History) != 2 {
		t.Fatalf("after a collection that succeeded: %+v (%d runs), want its error cleared", gc, len(st.History))
	}
}

func TestACompactionErrorIsClearedByTheNextCompactionThatCommits(t *testing.T) {
	under, _ := blob.Open(ctx, "mem://")
	rolloutsTable(t, under, 4, 10)
	b := fault.Wrap(under, fault.OnKeys(regexp.MustCompile(`^data/`), fault.OnOps(fault.Always(fault.Fault{Action: fault.Fail, Err: errors.New("disk full")}), fault.OpPut)))
	db, err := engine.Open(ctx, b, &engine.Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p := compactor.Policy{MinFragments: 2}
	if _, err := db.Compact(ctx, engine.CompactOptions{Policy: &p}); err == nil {
		t.Fatal("a compaction whose uploads fail succeeded")
	}
	if st := status(t, under); !strings.Contains(st.LastError, "disk full") || st.Kinds[compactor.KindCompaction].LastError != st.LastError {
		t.Fatalf("after a failed compaction: %q %+v", st.LastError, st.Kinds)
	}
	b.SetInjector(nil)
	if info, err := db.Compact(ctx, engine.CompactOptions{Policy: &p}); err != nil || info.Result.Version == 0 {
		t.Fatalf("compaction: %+v %v", info, err)
	}
	if st := status(t, under); st.LastError != "" || !st.LastErrorAt.IsZero() || st.Kinds[compactor.KindCompaction].LastError != "" || st.TotalCompactions != 1 {
		t.Fatalf("after a compaction that committed: last error %q at %v, kinds %+v", st.LastError, st.LastErrorAt, st.Kinds)
	}
}

func TestAFailedFleetMergeAndAFailedExportReachTheHistory(t *testing.T) {
	under, _ := blob.Open(ctx, "mem://")
	rolloutsTable(t, under, 1, 10)
	s, err := walshard.Open(ctx, under, &walshard.Options{Shard: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 100, 10)
	defer rec.Release()
	if err := s.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b := fault.Wrap(under, nil)
	db, err := engine.Open(ctx, b, &engine.Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b.SetInjector(fault.OnKeys(regexp.MustCompile(`^_versions/`), fault.OnOps(fault.Always(fault.Fault{Action: fault.Fail, Err: errors.New("commit refused")}), fault.OpPutIfAbsent)))
	if _, err := db.Merge(ctx); err == nil {
		t.Fatal("a merge whose commit fails succeeded")
	}
	b.SetInjector(nil)
	failed := errors.New("the view's location is unreachable")
	export := func(context.Context, blob.Bucket, string, compactor.GCPolicy, time.Time) (engine.IcebergOutcome, error) {
		return engine.IcebergOutcome{}, failed
	}
	mo := engine.MaintainOptions{NoGC: true, NoMerge: true, IcebergLocation: "mem://elsewhere", IcebergExport: export}
	if out := db.Maintain(ctx, mo); !errors.Is(out.Err, failed) {
		t.Fatalf("a pass whose export fails: %v", out.Err)
	}
	st := status(t, under)
	if !strings.Contains(st.Kinds[compactor.KindMerge].LastError, "commit refused") || !strings.Contains(st.Kinds[compactor.KindExport].LastError, failed.Error()) {
		t.Fatalf("after a failed merge and a failed export: %+v", st.Kinds)
	}
	if st.LastError != "" {
		t.Fatalf("their errors show as the compaction's: %q", st.LastError)
	}
	// Each cleared by the next of its kind that succeeds.
	if res, err := db.Merge(ctx); err != nil || res.Version == 0 {
		t.Fatalf("merge: %+v %v", res, err)
	}
	mo.IcebergExport = func(context.Context, blob.Bucket, string, compactor.GCPolicy, time.Time) (engine.IcebergOutcome, error) {
		return engine.IcebergOutcome{Written: true}, nil
	}
	if out := db.Maintain(ctx, mo); out.Err != nil {
		t.Fatal(out.Err)
	}
	st = status(t, under)
	for _, k := range []string{compactor.KindMerge, compactor.KindExport} {
		if ks := st.Kinds[k]; ks.LastError != "" || ks.LastSuccess.IsZero() {
			t.Fatalf("%s after one succeeded: %+v", k, ks)
		}
	}
}
