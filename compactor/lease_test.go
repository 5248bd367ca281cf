package compactor_test

import (
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/testenv"
)

func TestLeaseKeepsASecondJobOutUntilItExpiresOrIsReleased(t *testing.T) {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a, err := compactor.AcquireLease(ctx, b, "job-a", time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := compactor.AcquireLease(ctx, b, "job-b", time.Minute, now.Add(30*time.Second)); !errors.Is(err, compactor.ErrLeaseHeld) {
		t.Fatalf("second job during the lease: %v", err)
	}
	// A stale lease is broken.
	bl, err := compactor.AcquireLease(ctx, b, "job-b", time.Minute, now.Add(2*time.Minute))
	if err != nil || bl.Epoch != a.Epoch+1 {
		t.Fatalf("breaking a stale lease: %+v, %v", bl, err)
	}
	// A released lease is free at once.
	if err := bl.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := compactor.AcquireLease(ctx, b, "job-c", time.Minute, now.Add(2*time.Minute)); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

// A Job whose clock runs a year ahead takes the lease for a minute, by
// its clock a year from now: it keeps others out for that minute (and
// the clocks' slack) after the store wrote it, not for a year. Before,
// every compactor, the skewed one included, was kept off the table until
// the lease's expiry came round.
func TestALeaseFromAClockFarAheadEndsByTheStoresClock(t *testing.T) {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := compactor.AcquireLease(ctx, b, "job-ahead", time.Minute, now.Add(365*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	var held *compactor.LeaseHeldError
	if _, err := compactor.AcquireLease(ctx, b, "job-b", time.Minute, now.Add(30*time.Second)); !errors.As(err, &held) {
		t.Fatalf("during the lease's minute: %v", err)
	}
	if held.Expires.After(now.Add(3 * time.Minute)) {
		t.Fatalf("held until %v", held.Expires)
	}
	if l, ok, err := compactor.CurrentLease(ctx, b, now.Add(30*time.Second)); err != nil || !ok || l.Expires.After(now.Add(3*time.Minute)) {
		t.Fatalf("current lease: %+v, %v, %v", l, ok, err)
	}
	if _, err := compactor.AcquireLease(ctx, b, "job-b", time.Minute, now.Add(5*time.Minute)); err != nil {
		t.Fatalf("five minutes on: %v", err)
	}
}

func TestHistoryCarriesTotalsAndTheLastErrorUntilACompactionCommits(t *testing.T) {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	runs := []compactor.Run{
		{Started: t0, Version: 5, FragmentsBefore: 40, FragmentsAfter: 2},
		{Started: t0.Add(time.Hour), Error: "boom"},
		{Started: t0.Add(90 * time.Minute), Adopted: []string{"w7", "w9"}},
		{Started: t0.Add(2 * time.Hour), Version: 9, FragmentsBefore: 12, FragmentsAfter: 3},
		{Started: t0.Add(3 * time.Hour)}, // nothing to do
	}
	for _, r := range runs {
		if err := compactor.Record(ctx, b, r, 3); err != nil {
			t.Fatal(err)
		}
	}
	st, err := compactor.ReadStatus(ctx, b, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The compaction that committed after the failed one cleared its
	// error; the history keeps it.
	if st.TotalCompactions != 2 || st.TotalAdopted != 2 || !st.LastCompaction.Equal(t0.Add(2*time.Hour)) || st.LastError != "" || !st.LastErrorAt.IsZero() {
		t.Fatalf("status %+v", st)
	}
	if c := st.Kinds[compactor.KindCompaction]; c.LastError != "" || !c.LastSuccess.Equal(t0.Add(3*time.Hour)) || st.Kinds[compactor.KindAdoption].LastRun != t0.Add(90*time.Minute) {
		t.Fatalf("kinds %+v", st.Kinds)
	}
	if r := st.History[2]; r.LastError != "boom" || !r.LastErrorAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("the adoption's record after the failure: %+v", r)
	}
	if len(st.History) != 3 || !st.History[0].Started.Equal(t0.Add(3*time.Hour)) || len(st.History[2].Adopted) != 2 {
		t.Fatalf("history (newest first, pruned to 3): %+v", st.History)
	}
}

// A history record that does not decode is passed over, named, and does
// not block the status, the next record or a compaction.
func TestACorruptHistoryRecordIsSkipped(t *testing.T) {
	b := rolloutsTable(t, "mem://", 0, 3, 10)
	t0 := time.Now().Add(-time.Hour)
	if err := compactor.Record(ctx, b, compactor.Run{Started: t0, Version: 2}, 0); err != nil {
		t.Fatal(err)
	}
	var bad string
	for o, err := range blob.List(ctx, b, "_compactor/history/", 0) {
		if err != nil {
			t.Fatal(err)
		}
		bad = o.Key
	}
	data, err := b.Get(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, bad, data[:len(data)/2]); err != nil {
		t.Fatal(err)
	}
	if err := compactor.Record(ctx, b, compactor.Run{Started: t0.Add(time.Minute), Version: 3}, 0); err != nil {
		t.Fatalf("record after a corrupt one: %v", err)
	}
	st, err := compactor.ReadStatus(ctx, b, 0)
	if err != nil || len(st.Skipped) != 1 || len(st.History) != 1 || st.TotalCompactions != 1 {
		t.Fatalf("status: %+v %v", st, err)
	}
	if _, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil); err != nil {
		t.Fatal(err)
	}
}

// Every compaction takes the table's lease: while the Job (or anyone)
// holds it, a library or CLI compaction is refused naming the holder, and
// compacts nothing; once it is released, the same call compacts.
func TestACompactionRespectsAnotherHoldersLease(t *testing.T) {
	b := rolloutsTable(t, testenv.MinIO(t).URL(t), 0, 6, 10)
	job, err := compactor.TakeLease(ctx, b, "job-on-node-7", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	res, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, &compactor.Options{Holder: "strata compact"})
	var held *compactor.LeaseHeldError
	if !errors.As(err, &held) || held.Holder != "job-on-node-7" || time.Until(held.Expires) < 50*time.Minute || res.Version != 0 {
		t.Fatalf("compaction under another's lease: %+v %v", res, err)
	}
	if cur, ok, err := compactor.CurrentLease(ctx, b, time.Now()); err != nil || !ok || cur.Holder != "job-on-node-7" {
		t.Fatalf("current lease: %+v %v %v", cur, ok, err)
	}
	if err := job.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := compactor.CurrentLease(ctx, b, time.Now()); err != nil || ok {
		t.Fatalf("a released lease is still current (%v)", err)
	}
	res, err = compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, &compactor.Options{Holder: "strata compact"})
	if err != nil || res.Version == 0 || res.FragmentsAfter != 1 {
		t.Fatalf("compaction after the release: %+v %v", res, err)
	}
	if _, ok, _ := compactor.CurrentLease(ctx, b, time.Now()); ok {
		t.Fatal("the compaction kept its lease after it ended")
	}
}

// A held lease is renewed while its holder works, so a run longer than the
// TTL keeps others out.
func TestAHeldLeaseIsRenewed(t *testing.T) {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	h, err := compactor.TakeLease(ctx, b, "long-run", 3*time.Second, start)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for h.Lease().Epoch == 1 {
		if time.Now().After(deadline) {
			t.Fatal("the lease was never renewed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Past the first TTL, the lease still keeps a second holder out.
	if _, err := compactor.AcquireLease(ctx, b, "other", time.Minute, start.Add(3500*time.Millisecond)); !errors.Is(err, compactor.ErrLeaseHeld) {
		t.Fatalf("after a renewal, past the first TTL: %v", err)
	}
}

// A lease create whose answer is lost, or wrongly says "exists", is read
// back: the lease is the caller's, not a stranger's held for the TTL.
func TestALeaseCreateWithALostAnswerIsOurs(t *testing.T) {
	for _, act := range []fault.Action{fault.LoseResponse, fault.FalseExists} {
		under, err := blob.Open(ctx, "mem://")
		if err != nil {
			t.Fatal(err)
		}
		b := fault.Wrap(under, fault.OnKeys(regexp.MustCompile(`^_compactor/lease/`),
			fault.OnOps(fault.Always(fault.Fault{Action: act}), fault.OpPutIfAbsent)))
		l, err := compactor.AcquireLease(ctx, b, "job-a", time.Minute, time.Now())
		if err != nil || l.Holder != "job-a" {
			t.Fatalf("%v: acquire: %+v %v", act, l, err)
		}
		if err := l.Release(ctx, b); err != nil {
			t.Fatalf("%v: release: %v", act, err)
		}
		if _, held, err := compactor.CurrentLease(ctx, under, time.Now()); err != nil || held {
			t.Fatalf("%v: the lease is still held after its release (%v)", act, err)
		}
	}
}
