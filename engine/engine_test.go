package engine_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

// The promises of package engine (its doc comment), pinned here:
//   - every background task ends with Close, which waits for it
//     (TestCloseWaitsForBackgroundWork);
//   - a background failure is told to BackgroundError and kept as the
//     DB's last error (TestBackgroundFailuresAreToldAndKept);
//   - a compaction's run is recorded by one function, with its real
//     duration when it fails, and not at all when there is nothing to
//     compact (TestACompactionRecordsItsRunOnce);
//   - what the DB does is told to the listener: flushes, merges,
//     compactions, collections, adoptions (TestTheListenerHearsOfEverything),
//     and its shard's merge commits and write stalls
//     (TestTheShardsCommitsAndStallsAreTheDBsEvents);
//   - what production runs through it costs the requests its golden trace
//     names: an append and a flush through a shard, a fleet merge, an
//     upsert merged by key, a maintenance pass
//     (TestGoldenTracesOfTheProductionPaths);
//   - every error it returns has one code, which the server and the CLI
//     answer by (TestEverySentinelHasItsCode);
//   - a verb that chooses rows by a filter or a key sees what the
//     process's shard acknowledged (TestADeleteSeesTheRowsItsShardAcknowledged);
//   - a streamed append sent again stores nothing more and leaves no
//     fragment behind (TestAStreamedAppendSentAgainStoresNothingMore);
//   - a drop leaves no object and stops the DB
//     (TestDropLeavesNothingAndStopsTheDB).

var ctx = context.Background()

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// rollouts makes a table at u with n one-batch commits of rows rows.
func rolloutsTable(t *testing.T, b blob.Bucket, n, rows int) {
	t.Helper()
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		rec := rollouts.Batch(testenv.Allocator(t), 42, 0, int64(i*rows), rows)
		_, err := tb.Append(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// events records what a listener hears.
type events struct {
	mu                                       sync.Mutex
	flushes, merges, compactions, gcs, adopt []error
	background                               []engine.BackgroundErrorInfo
	runs                                     []compactor.Run
	skipped                                  []string
}

func (e *events) listener() engine.EventListener {
	return engine.EventListener{
		FlushEnd: func(i engine.FlushInfo) { e.mu.Lock(); e.flushes = append(e.flushes, i.Err); e.mu.Unlock() },
		MergeEnd: func(i engine.MergeInfo) { e.mu.Lock(); e.merges = append(e.merges, i.Err); e.mu.Unlock() },
		CompactionEnd: func(i engine.CompactionInfo) {
			e.mu.Lock()
			e.compactions, e.runs, e.skipped = append(e.compactions, i.Err), append(e.runs, i.Run), append(e.skipped, i.Skipped)
			e.mu.Unlock()
		},
		GCEnd:           func(i engine.GCInfo) { e.mu.Lock(); e.gcs = append(e.gcs, i.Err); e.mu.Unlock() },
		AdoptionEnd:     func(i engine.AdoptionInfo) { e.mu.Lock(); e.adopt = append(e.adopt, i.Err); e.mu.Unlock() },
		BackgroundError: func(i engine.BackgroundErrorInfo) { e.mu.Lock(); e.background = append(e.background, i); e.mu.Unlock() },
	}
}

func TestCloseWaitsForBackgroundWork(t *testing.T) {
	b, _ := blob.Open(ctx, "mem://")
	rolloutsTable(t, b, 0, 0)
	db, err := engine.Open(ctx, b, &engine.Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var ended atomic.Bool
	running := make(chan struct{})
	db.Go("work", func(ctx context.Context) error {
		close(running)
		<-ctx.Done() // runs until the DB closes
		time.Sleep(20 * time.Millisecond)
		ended.Store(true)
		return nil
	})
	<-running
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if !ended.Load() {
		t.Fatal("Close returned before the background work ended")
	}
	if _, err := db.Append(ctx, engine.AppendOptions{}); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("an append after Close: %v, want ErrClosed", err)
	}
}

func TestBackgroundFailuresAreToldAndKept(t *testing.T) {
	b, _ := blob.Open(ctx, "mem://")
	rolloutsTable(t, b, 0, 0)
	var ev events
	db, err := engine.Open(ctx, b, &engine.Options{Log: quiet, Listener: ev.listener()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	boom := errors.New("boom")
	db.Go("a task", func(context.Context) error { return boom })
	db.Go("a task that panics", func(context.Context) error { panic("bad") })
	deadline := time.Now().Add(5 * time.Second)
	for {
		ev.mu.Lock()
		n := len(ev.background)
		ev.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d background errors told, want 2", n)
		}
		time.Sleep(time.Millisecond)
	}
	last, at := db.LastError()
	if last.Err == nil || at.IsZero() {
		t.Fatalf("last error %+v at %v, want one kept", last, at)
	}
}

func TestACompactionRecordsItsRunOnce(t *testing.T) {
	under, _ := blob.Open(ctx, "mem://")
	rolloutsTable(t, under, 4, 10)
	// A store that fails every fragment upload: the compaction fails.
	failing := fault.Wrap(under, fault.OnKeys(regexp.MustCompile(`^data/`), fault.OnOps(fault.Always(fault.Fault{Action: fault.Fail, Err: errors.New("disk full")}), fault.OpPut)))
	var ev events
	db, err := engine.Open(ctx, failing, &engine.Options{Log: quiet, Listener: ev.listener()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p := compactor.Policy{MinFragments: 2}
	start := time.Now()
	if _, err := db.Compact(ctx, engine.CompactOptions{Policy: &p}); err == nil {
		t.Fatal("a compaction whose uploads fail succeeded")
	}
	took := time.Since(start)
	st, err := compactor.ReadStatus(ctx, under, 10)
	if err != nil || len(st.History) != 1 {
		t.Fatalf("history after a failed compaction: %+v %v, want one run", st.History, err)
	}
	if run := st.History[0]; run.Error == "" || run.DurationS <= 0 || run.DurationS > took.Seconds() {
		t.Fatalf("the failed run %+v: want its error and its duration (0 < d <= %v)", run, took)
	}
	// Compacted, then nothing left to compact: one more run, not two.
	failing.SetInjector(nil)
	if info, err := db.Compact(ctx, engine.CompactOptions{Policy: &p}); err != nil || info.Result.Version == 0 {
		t.Fatalf("compaction: %+v %v", info, err)
	}
	info, err := db.Compact(ctx, engine.CompactOptions{Policy: &p})
	if err != nil || info.Skipped == "" || !info.Run.Started.IsZero() {
		t.Fatalf("a compaction with nothing to do: %+v %v, want it skipped and not recorded", info, err)
	}
	if st, _ := compactor.ReadStatus(ctx, under, 10); len(st.History) != 2 {
		t.Fatalf("history: %d runs, want 2 (a failed one, a committed one)", len(st.History))
	}
	// Another compactor holds the lease: nothing runs, nothing is recorded.
	if _, err := compactor.AcquireLease(ctx, under, "someone", time.Hour, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Compact(ctx, engine.CompactOptions{Policy: &p}); !errors.Is(err, compactor.ErrLeaseHeld) {
		t.Fatalf("compaction under another's lease: %v, want ErrLeaseHeld", err)
	}
	if st, _ := compactor.ReadStatus(ctx, under, 10); len(st.History) != 2 {
		t.Fatalf("history after a lease refusal: %d runs, want 2", len(st.History))
	}
}

func TestTheListenerHearsOfEverything(t *testing.T) {
	b, _ := blob.Open(ctx, "mem://")
	rolloutsTable(t, b, 3, 10)
	var ev events
	db, err := engine.Open(ctx, b, &engine.Options{Log: quiet, Listener: ev.listener(), Shard: walshard.Options{Shard: "w1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 0, 10)
	defer rec.Release()
	if _, err := db.Append(ctx, engine.AppendOptions{}, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	p := compactor.Policy{MinFragments: 2}
	if _, err := db.Compact(ctx, engine.CompactOptions{Policy: &p}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GC(ctx, engine.GCOptions{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	// A dead shard with rows only in its WAL, adopted.
	dead, err := walshard.Open(ctx, b, &walshard.Options{Shard: "dead"})
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	dead.Close()
	if _, err := db.Adopt(ctx, "dead", engine.AdoptOptions{}); err != nil {
		t.Fatal(err)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.flushes) == 0 || len(ev.merges) == 0 || len(ev.compactions) != 1 || len(ev.gcs) != 1 || len(ev.adopt) != 1 {
		t.Fatalf("heard %d flushes, %d merges, %d compactions, %d collections, %d adoptions; want each",
			len(ev.flushes), len(ev.merges), len(ev.compactions), len(ev.gcs), len(ev.adopt))
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil || s.Manifest().Rows() != 50 {
		t.Fatalf("table: %v, want its 30 rows and the shards' 20", err)
	}
}
