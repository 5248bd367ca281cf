package commit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// faultyStore wraps a fresh memory bucket with the ambiguous failures that
// break naive commit protocols, on manifest creates in particular.
func faultyStore(t *testing.T, seed uint64) (under blob.Bucket, f *fault.Bucket) {
	under = open(t, "mem://")
	manifests := regexp.MustCompile(`^_versions/`)
	inj := fault.Any(
		fault.Latency(seed, 0, 300*time.Microsecond),
		fault.OnKeys(manifests, fault.OnOps(fault.WithProbability(seed+1, 0.10, fault.Always(fault.Fault{Action: fault.LoseResponse})), fault.OpPutIfAbsent)),
		fault.OnKeys(manifests, fault.OnOps(fault.WithProbability(seed+2, 0.10, fault.Always(fault.Fault{Action: fault.FalseExists})), fault.OpPutIfAbsent)),
		fault.OnOps(fault.WithProbability(seed+3, 0.05, fault.Always(fault.Fault{Action: fault.Conflict})), fault.OpPutIfAbsent),
		fault.OnOps(fault.WithProbability(seed+4, 0.03, fault.Always(fault.Fault{Action: fault.Fail})), fault.OpGet, fault.OpList, fault.OpPut),
	)
	return under, fault.Wrap(under, inj)
}

// A failed append is retried by the worker with the same commit id, as a
// real worker retries an unacknowledged batch; acknowledged appends must be
// stored exactly once.
func TestAppendsUnderFaultsAreNeitherLostNorDoubled(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	under, f := faultyStore(t, seed)
	createIDTable(t, under)
	const writers, n = 6, 30
	var mu sync.Mutex
	var versions []uint64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			tb := openRetrying(f)
			for i := range n {
				v, err := appendWithRetries(tb, int64(w*1000+i))
				if err != nil {
					t.Errorf("writer %d, append %d: %v", w, i, err)
					return
				}
				mu.Lock()
				versions = append(versions, v)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("faults injected: %v over %d requests", f.Injected(), f.Requests())
	if t.Failed() {
		return
	}
	checkTable(t, under, writers, n, versions)
}

// openRetrying opens a handle through a faulty bucket, retrying injected
// read failures.
func openRetrying(b blob.Bucket) *commit.Table {
	for {
		if tb, err := commit.OpenTable(ctx, b, &commit.Options{MaxAttempts: 200, Budget: time.Minute}); err == nil {
			return tb
		}
	}
}

// appendWithRetries writes the fragment once and retries the commit of the
// same transaction (same commit id) until it is acknowledged.
func appendWithRetries(tb *commit.Table, id int64) (uint64, error) {
	rec := idBatch(id)
	defer rec.Release()
	var frag format.Fragment
	var err error
	for range 50 {
		if frag, err = fragment.Write(ctx, tb.Bucket(), idSchema, rec); err == nil {
			break
		}
	}
	if err != nil {
		return 0, err
	}
	txn := format.Transaction{Kind: format.KindAppend, CommitID: format.NewID(), Added: []format.Fragment{frag}}
	for range 50 {
		res, err := tb.Commit(ctx, txn)
		if err == nil {
			return res.Version, nil
		}
		if _, rerr := tb.Refresh(ctx); rerr != nil {
			continue
		}
	}
	return 0, fmt.Errorf("append %d never acknowledged", id)
}

// The linearizability check: appends and reads of the latest version,
// recorded with their call and return times, must be explained by a
// sequential table that applies appends one at a time.
type appendIn struct{ id int64 }
type readOut struct {
	version uint64
	ids     []int64
}

var tableModel = porcupine.Model{
	Init: func() any { return []int64(nil) },
	Step: func(state, input, output any) (bool, any) {
		ids := state.([]int64)
		switch in := input.(type) {
		case appendIn:
			// Version 1 is the empty table; the k-th append makes k+1.
			if output.(uint64) != uint64(len(ids)+2) {
				return false, state
			}
			next := append(append([]int64(nil), ids...), in.id)
			return true, next
		default:
			out := output.(readOut)
			if out.version != uint64(len(ids)+1) || len(out.ids) != len(ids) {
				return false, state
			}
			sorted := append([]int64(nil), ids...)
			sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
			for i := range sorted {
				if sorted[i] != out.ids[i] {
					return false, state
				}
			}
			return true, state
		}
	},
	Equal: func(a, b any) bool {
		x, y := a.([]int64), b.([]int64)
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	},
}

func TestCommitHistoryIsLinearizable(t *testing.T) {
	base := uint64(time.Now().UnixNano())
	for round := range 5 {
		seed := base + uint64(round)*1000
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			t.Logf("seed %d", seed)
			under, f := faultyStore(t, seed)
			createIDTable(t, under)
			start := time.Now()
			var mu sync.Mutex
			var history []porcupine.Operation
			record := func(client int, in, out any, call time.Time) {
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: client, Input: in, Output: out,
					Call: call.Sub(start).Nanoseconds(), Return: time.Since(start).Nanoseconds()})
				mu.Unlock()
			}
			rng := rand.New(rand.NewPCG(seed, 1))
			var wg sync.WaitGroup
			for w := range 4 {
				pause := time.Duration(rng.IntN(300)) * time.Microsecond
				wg.Go(func() {
					tb := openRetrying(f)
					for i := range 8 {
						time.Sleep(pause)
						id := int64(w*1000 + i)
						call := time.Now()
						v, err := appendWithRetries(tb, id)
						if err != nil {
							t.Error(err)
							return
						}
						record(w, appendIn{id}, v, call)
					}
				})
			}
			for r := range 2 {
				wg.Go(func() {
					for range 12 {
						call := time.Now()
						s, err := table.Open(ctx, f, nil)
						if err != nil {
							continue // a failed read observes nothing
						}
						var ids []int64
						failed := false
						for rec, err := range s.Scan(ctx, table.ScanOptions{}) {
							if err != nil {
								failed = true
								break
							}
							ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
						}
						if failed {
							continue
						}
						sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
						record(4+r, struct{}{}, readOut{s.Version(), ids}, call)
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			res := porcupine.CheckOperationsTimeout(tableModel, history, 30*time.Second)
			if res != porcupine.Ok {
				t.Fatalf("history of %d operations is not linearizable (%v); seed %d; faults %v", len(history), res, seed, f.Injected())
			}
			t.Logf("%d operations linearizable; faults %v", len(history), f.Injected())
		})
	}
}

// A create whose answer is lost, from a store that then stops answering,
// leaves the commit's outcome unknown: the error says so (ErrOutcomeUnknown,
// beside the store's retryable error), for the create may have landed —
// here it did. Reported as the store's error alone, it read as a failure
// to retry, and a retry with a new commit would store the rows twice.
func TestAnUnanswerableCreateIsAnUnknownOutcome(t *testing.T) {
	under := open(t, "mem://")
	createIDTable(t, under)
	var lost atomic.Bool
	f := fault.Wrap(under, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		switch {
		case lost.Load():
			return fault.Fault{Action: fault.Fail} // the store is gone
		case op == fault.OpPutIfAbsent && strings.HasPrefix(key, format.VersionsDir):
			lost.Store(true)
			return fault.Fault{Action: fault.LoseResponse}
		}
		return fault.Fault{}
	}))
	tb, err := commit.OpenTable(ctx, f, &commit.Options{BaseBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Budget: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rec := idBatch(7)
	defer rec.Release()
	_, err = tb.Append(ctx, rec)
	if !errors.Is(err, commit.ErrOutcomeUnknown) || !errors.Is(err, blob.ErrRetryable) {
		t.Fatalf("append: %v, want ErrOutcomeUnknown and the store's retryable error", err)
	}
	if v, err := table.LatestVersion(ctx, under); err != nil || v != 2 {
		t.Fatalf("latest version %d, %v: the create that lost its answer should have landed", v, err)
	}
}

// A store away for a moment between a create and the read that tells its
// outcome (a restart) costs the commit time, not an unknown outcome: the
// reads go on within the commit's budget, and the append succeeds, once.
func TestACommitWaitsForTheStoreToTellItsOutcome(t *testing.T) {
	under := open(t, "mem://")
	createIDTable(t, under)
	var lost atomic.Bool
	var failed atomic.Int64
	f := fault.Wrap(under, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		switch {
		case lost.Load() && failed.Add(1) <= 30:
			return fault.Fault{Action: fault.Fail} // away for 30 requests
		case op == fault.OpPutIfAbsent && strings.HasPrefix(key, format.VersionsDir) && !lost.Load():
			lost.Store(true)
			return fault.Fault{Action: fault.LoseResponse}
		}
		return fault.Fault{}
	}))
	tb, err := commit.OpenTable(ctx, f, &commit.Options{BaseBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rec := idBatch(7)
	defer rec.Release()
	res, err := tb.Append(ctx, rec)
	if err != nil || res.Version != 2 {
		t.Fatalf("append: v%d, %v; want v2", res.Version, err)
	}
	if failed.Load() < 30 {
		t.Fatalf("%d requests failed: the outage did not happen as planned", failed.Load())
	}
	if v, err := table.LatestVersion(ctx, under); err != nil || v != 2 {
		t.Fatalf("latest version %d, %v: the append is not there once", v, err)
	}
}

// A commit canceled while its create was out may have landed: the error
// says the outcome is unknown (it did land here), not only "canceled".
func TestACommitCanceledMidCreateIsAnUnknownOutcome(t *testing.T) {
	under := open(t, "mem://")
	createIDTable(t, under)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tb, err := commit.OpenTable(ctx, &cancelMidCreate{Bucket: under, cancel: cancel}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := idBatch(7)
	defer rec.Release()
	_, err = tb.Append(cctx, rec)
	if !errors.Is(err, commit.ErrOutcomeUnknown) {
		t.Fatalf("append canceled mid-create: %v, want ErrOutcomeUnknown", err)
	}
	if v, err := table.LatestVersion(ctx, under); err != nil || v != 2 {
		t.Fatalf("latest version %d, %v: the create should have landed", v, err)
	}
}

// cancelMidCreate lands a manifest's create, then cancels the caller's
// context and answers as a store client does when its context ends
// while the request is out.
type cancelMidCreate struct {
	blob.Bucket
	cancel func()
}

func (c *cancelMidCreate) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if !strings.HasPrefix(key, format.VersionsDir) {
		return c.Bucket.PutIfAbsent(ctx, key, data)
	}
	if err := c.Bucket.PutIfAbsent(context.Background(), key, data); err != nil {
		return err
	}
	c.cancel()
	return &blob.Error{Op: "put-if-absent", Key: key, Kind: blob.ErrRetryable, Err: context.Canceled}
}
