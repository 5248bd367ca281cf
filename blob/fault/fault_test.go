package fault_test

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
)

func memBucket(t *testing.T) blob.Bucket {
	b, err := blob.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var ctx = context.Background()

func TestFailDoesNotMakeTheRequest(t *testing.T) {
	under := memBucket(t)
	f := fault.Wrap(under, fault.OnOps(fault.Always(fault.Fault{Action: fault.Fail}), fault.OpPutIfAbsent))
	err := f.PutIfAbsent(ctx, "k", []byte("x"))
	if !errors.Is(err, blob.ErrRetryable) || !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("got %v, want a retryable injected error", err)
	}
	if _, err := under.Get(ctx, "k"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("the failed create landed: %v", err)
	}
}

func TestLostResponseLandsTheWrite(t *testing.T) {
	under := memBucket(t)
	f := fault.Wrap(under, fault.Always(fault.Fault{Action: fault.LoseResponse}))
	if err := f.PutIfAbsent(ctx, "k", []byte("x")); !errors.Is(err, blob.ErrRetryable) {
		t.Fatalf("got %v, want retryable", err)
	}
	if got, err := under.Get(ctx, "k"); err != nil || string(got) != "x" {
		t.Fatalf("the write should have landed: %q, %v", got, err)
	}
}

func TestFalseExistsAfterTheCreateLanded(t *testing.T) {
	under := memBucket(t)
	f := fault.Wrap(under, fault.Always(fault.Fault{Action: fault.FalseExists}))
	if err := f.PutIfAbsent(ctx, "k", []byte("mine")); !errors.Is(err, blob.ErrExists) {
		t.Fatalf("got %v, want ErrExists", err)
	}
	if got, _ := under.Get(ctx, "k"); string(got) != "mine" {
		t.Fatalf("object holds %q, want the caller's own write", got)
	}
}

func TestConflictIsRetryableAndDoesNotWrite(t *testing.T) {
	under := memBucket(t)
	f := fault.Wrap(under, fault.Always(fault.Fault{Action: fault.Conflict}))
	err := f.PutIfAbsent(ctx, "k", []byte("x"))
	if !errors.Is(err, blob.ErrRetryable) {
		t.Fatalf("got %v, want retryable", err)
	}
	if _, err := under.Get(ctx, "k"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("a 409 must not write: %v", err)
	}
}

func TestCrashAfterNStopsEverythingUntilRevived(t *testing.T) {
	f := fault.Wrap(memBucket(t), fault.CrashAfter(3))
	for i := range 3 {
		if err := f.Put(ctx, "k", bytes.NewReader(nil)); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	for i := range 3 {
		if _, err := f.Get(ctx, "k"); !errors.Is(err, fault.ErrCrashed) {
			t.Fatalf("request %d after the crash: %v, want ErrCrashed", i+4, err)
		}
	}
	if !f.Crashed() {
		t.Fatal("Crashed() = false")
	}
	f.SetInjector(nil)
	f.Revive()
	if _, err := f.Get(ctx, "k"); err != nil {
		t.Fatalf("after Revive: %v", err)
	}
	if got := f.Injected()["crash"]; got != 3 {
		t.Fatalf("crash count %d, want 3", got)
	}
}

func TestIgnoreConditionOverwrites(t *testing.T) {
	f := fault.Wrap(memBucket(t), fault.Always(fault.Fault{Action: fault.IgnoreCondition}))
	if err := f.PutIfAbsent(ctx, "k", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := f.PutIfAbsent(ctx, "k", []byte("b")); err != nil {
		t.Fatalf("second create: %v, want success (conditions ignored)", err)
	}
}

func TestKeyAndNthFilters(t *testing.T) {
	inj := fault.OnKeys(regexp.MustCompile(`^_versions/`), fault.Nth(2, fault.Always(fault.Fault{Action: fault.Fail})))
	f := fault.Wrap(memBucket(t), inj)
	if err := f.PutIfAbsent(ctx, "data/x", nil); err != nil {
		t.Fatalf("non-matching key: %v", err)
	}
	if err := f.PutIfAbsent(ctx, "_versions/1", nil); err != nil {
		t.Fatalf("first matching request: %v", err)
	}
	if err := f.PutIfAbsent(ctx, "_versions/2", nil); err == nil {
		t.Fatal("second matching request should fail")
	}
	if err := f.PutIfAbsent(ctx, "_versions/3", nil); err != nil {
		t.Fatalf("third matching request: %v", err)
	}
}

func TestProbabilityIsReproducibleFromTheSeed(t *testing.T) {
	run := func(seed uint64) []bool {
		inj := fault.WithProbability(seed, 0.3, fault.Always(fault.Fault{Action: fault.Fail}))
		var out []bool
		for range 200 {
			out = append(out, inj.Inject(fault.OpGet, "k").Action == fault.Fail)
		}
		return out
	}
	a, b, c := run(7), run(7), run(8)
	n := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 7 differs from itself at request %d", i)
		}
		if a[i] {
			n++
		}
	}
	if n < 30 || n > 90 {
		t.Fatalf("%d of 200 fired at p=0.3", n)
	}
	same := true
	for i := range a {
		same = same && a[i] == c[i]
	}
	if same {
		t.Fatal("seeds 7 and 8 gave the same faults")
	}
}

func TestAnyTakesTheFirstFaultAndAddsDelays(t *testing.T) {
	inj := fault.Any(fault.Latency(1, 5*time.Millisecond, 6*time.Millisecond), fault.Never(), fault.Always(fault.Fault{Action: fault.Conflict}))
	f := inj.Inject(fault.OpGet, "k")
	if f.Action != fault.Conflict || f.Delay < 5*time.Millisecond {
		t.Fatalf("got %+v, want a conflict after >= 5ms", f)
	}
}

func TestDelayHonoursContext(t *testing.T) {
	f := fault.Wrap(memBucket(t), fault.Always(fault.Fault{Delay: time.Hour}))
	c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := f.Get(c, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's deadline", err)
	}
}

// A batched delete is one request to the injector: a failure deletes
// nothing, a lost response deletes every key; over a store that deletes
// one object a request the wrapper offers no batch.
func TestABatchedDeleteIsOneRequest(t *testing.T) {
	under, err := blob.OpenFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "b", "c"}
	for _, k := range keys {
		if err := under.PutIfAbsent(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	left := func() int {
		n := 0
		for _, err := range blob.List(ctx, under, "", 0) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	fail := fault.Wrap(under, fault.Always(fault.Fault{Action: fault.Fail}))
	if err := blob.DeleteAll(ctx, fail, keys); !errors.Is(err, fault.ErrInjected) || left() != 3 || fail.Requests() != 1 {
		t.Fatalf("a failed batch: %v, %d keys left, %d requests; want the injected error, 3, 1", err, left(), fail.Requests())
	}
	lose := fault.Wrap(under, fault.Always(fault.Fault{Action: fault.LoseResponse}))
	if err := blob.DeleteAll(ctx, lose, keys); !errors.Is(err, blob.ErrRetryable) || left() != 0 || lose.Requests() != 1 {
		t.Fatalf("a batch whose answer is lost: %v, %d keys left, %d requests; want a retryable error, 0, 1", err, left(), lose.Requests())
	}
	if blob.CanDeleteBatch(ctx, fault.Wrap(memBucket(t), nil)) {
		t.Fatal("a wrapper over memory offers batched deletes")
	}
}
