package compactor_test

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
)

// quietOwner opens shard "frozen" of a new table in dir, appends,
// flushes and merges ten rows, ages every object of the shard and the
// fleet past the retirement age, and sets the owner's clock a day and
// more ahead: it has read the claims, and written, long ago.
func quietOwner(t *testing.T, dir string) (blob.Bucket, *walshard.Shard) {
	t.Helper()
	under := rolloutsTable(t, "file://"+dir, 0, 1, 10)
	offset := new(atomic.Int64)
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	owner, err := walshard.Open(ctx, under, &walshard.Options{Shard: "frozen", Commit: commit.Options{Now: now}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { owner.Close() })
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 0, 10)
	defer rec.Release()
	if err := owner.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	age(t, dir, format.ShardDir("frozen"), 25*time.Hour)
	age(t, dir, format.FleetDir, 25*time.Hour)
	offset.Store(int64(26 * time.Hour))
	return under, owner
}

// reopens tells that a new handle opens the shard and holds what it
// should of the table's and its WAL's rows: want rows in all.
func reopens(t *testing.T, b blob.Bucket, want int64) {
	t.Helper()
	s, err := walshard.Open(ctx, b, &walshard.Options{Shard: "frozen"})
	if err != nil {
		t.Fatalf("the shard does not open again: %v", err)
	}
	defer s.Close()
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Rows() != want {
		t.Fatalf("the table holds %d rows, want %d", m.Rows(), want)
	}
}

// An owner quiet past the retirement age whose append lands after a
// collection listed its shard, and before the collection's claim, is
// acknowledged, and the collection then retires nothing: it lists the
// shard again after its claim and finds the entry. Before, it deleted
// what it had listed, the claims last, and left the acknowledged entry
// alone in a shard with no state, above WAL positions it had deleted: no
// owner could open the shard again (simulation seed 26262).
func TestAnAppendLandingWhileACollectionRetiresTheShardKeepsIt(t *testing.T) {
	dir := t.TempDir()
	under, owner := quietOwner(t, dir)
	var appended error = errors.New("no append")
	b := fault.Wrap(under, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if op == fault.OpPutIfAbsent && strings.HasPrefix(key, format.ShardEpochsDir("frozen")) && appended != nil {
			rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 10, 5)
			defer rec.Release()
			appended = owner.Append(ctx, rec) // before the collector's claim
		}
		return fault.Fault{}
	}))
	res, err := compactor.GC(ctx, b, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if appended != nil {
		t.Fatalf("the owner's append, before any claim: %v", appended)
	}
	if len(res.ShardsRetired) > 0 {
		t.Fatalf("retired %v under an acknowledged append", res.ShardsRetired)
	}
	owner.Close()
	reopens(t, under, 25) // the table's 10, the shard's 10 and 5
}

// An owner quiet past the retirement age that read the claims just before
// a collection retired its shard and appends after it is not
// acknowledged: it reads the claims after its write too, finds its own
// gone, and answers ErrAppendUnknown; the shard opens again and holds the
// table's rows. Before, the read just before let it skip both reads; it
// acknowledged an entry the next owner could not open past.
func TestAnAppendAfterARetirementIsNotAcknowledged(t *testing.T) {
	dir := t.TempDir()
	under, owner := quietOwner(t, dir)
	for _, err := range owner.ScanFresh(ctx, table.ScanOptions{}) { // reads the claims: none newer
		if err != nil {
			t.Fatal(err)
		}
	}
	res, err := compactor.GC(ctx, under, nil, time.Now())
	if err != nil || !slices.Equal(res.ShardsRetired, []string{"frozen"}) {
		t.Fatalf("retired %v, %v", res.ShardsRetired, err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 1, 10, 5)
	defer rec.Release()
	if err := owner.Append(ctx, rec); !errors.Is(err, walshard.ErrAppendUnknown) && !errors.Is(err, walshard.ErrFenced) {
		t.Fatalf("an append into the retired shard: %v, want it not acknowledged", err)
	}
	owner.Close()
	reopens(t, under, 20) // the table's 10 and the shard's
}
