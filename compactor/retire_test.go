package compactor_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
)

// shardRows opens shard, appends n rows of worker w from seq0, flushes,
// merges unless keep, and closes it.
func shardRows(t *testing.T, b blob.Bucket, shard string, w int, seq0 int64, n int, merge bool) {
	t.Helper()
	s, err := walshard.Open(ctx, b, &walshard.Options{Shard: shard})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := rollouts.Batch(testenv.Allocator(t), 42, w, seq0, n)
	defer rec.Release()
	if err := s.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if merge {
		if _, err := s.Merge(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// age moves the modification time of every file under dir/prefix back
// by d.
func age(t *testing.T, dir, prefix string, d time.Duration) {
	t.Helper()
	then := time.Now().Add(-d)
	root := filepath.Join(dir, filepath.FromSlash(prefix))
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		return os.Chtimes(p, then, then)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// keysUnder lists the keys under prefix.
func keysUnder(t *testing.T, b blob.Bucket, prefix string) []string {
	t.Helper()
	var out []string
	for o, err := range blob.List(ctx, b, prefix, 0) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.Key)
	}
	return out
}

// A shard quiet for longer than the retirement age that holds no row
// outside the table is retired: its objects go, but the generations the
// table still references, and so do its fleet objects. A quiet shard with
// a generation not merged, and a shard written recently, stay. The rows
// are all there after, and the retired shard opens again under its name:
// its new rows are merged.
func TestGCRetiresAQuietShardThatHoldsNothing(t *testing.T) {
	dir := t.TempDir()
	b := rolloutsTable(t, "file://"+dir, 0, 1, 10)
	shardRows(t, b, "gone", 1, 0, 10, true)
	shardRows(t, b, "pending", 2, 0, 10, false)
	shardRows(t, b, "live", 3, 0, 10, true)
	for _, p := range []string{format.ShardDir("gone"), format.ShardDir("pending"), format.FleetDir} {
		age(t, dir, p, 25*time.Hour)
	}
	before := digest(t, b)
	latest, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	referenced := map[string]bool{}
	for _, f := range latest.Fragments {
		referenced[f.Key] = true
	}
	res, err := compactor.GC(ctx, b, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.ShardsRetired, []string{"gone"}) {
		t.Fatalf("retired %v, want [gone]", res.ShardsRetired)
	}
	for _, k := range keysUnder(t, b, format.ShardDir("gone")) {
		if !referenced[k] {
			t.Errorf("%s is left of the retired shard", k)
		}
	}
	if left := keysUnder(t, b, format.FleetDir); slices.ContainsFunc(left, func(k string) bool { return strings.Contains(k, "/gone") }) {
		t.Errorf("fleet objects of the retired shard are left: %v", left)
	}
	for _, shard := range []string{"pending", "live"} {
		if len(keysUnder(t, b, format.ShardEpochsDir(shard))) == 0 || !exists(t, b, format.FleetShardsDir+shard) {
			t.Errorf("shard %s lost its claims or its registration", shard)
		}
	}
	sameRows(t, before, digest(t, b), "retiring a shard")
	// Its name again: above what the table records.
	shardRows(t, b, "gone", 1, 10, 10, true)
	after := digest(t, b)
	if len(after) != len(before)+10 {
		t.Fatalf("%d rows after the retired shard's name merged 10 more, %d before", len(after), len(before))
	}
	// Nothing more goes at the next collection (the shard is young again).
	if res, err := compactor.GC(ctx, b, nil, time.Now()); err != nil || len(res.ShardsRetired) != 0 {
		t.Fatalf("the next collection: retired %v, %v", res.ShardsRetired, err)
	}
}

// A retirement cut short (a delete failed) leaves the shard fenced by the
// collector's claim: its owner, waking, is refused before it writes; the
// shard opens as any; and a later collection finishes the retirement.
func TestARetirementCutShortFencesTheOwnerAndIsFinishedLater(t *testing.T) {
	dir := t.TempDir()
	under, owner := quietOwner(t, dir) // its claims read long ago
	before := digest(t, under)
	// The collection fails at its first delete of a fleet object: the
	// WAL, the states and the generations go, the claims stay.
	b := fault.Wrap(under, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if op == fault.OpDelete && strings.HasPrefix(key, format.FleetDir) {
			return fault.Fault{Action: fault.Fail}
		}
		return fault.Fault{}
	}))
	if _, err := compactor.GC(ctx, b, nil, time.Now()); err == nil {
		t.Fatal("the collection succeeded although its deletes of fleet objects failed")
	}
	again := rollouts.Batch(testenv.Allocator(t), 42, 1, 10, 5)
	defer again.Release()
	if err := owner.Append(ctx, again); !errors.Is(err, walshard.ErrFenced) {
		t.Fatalf("the owner of a shard being retired, waking: %v, want ErrFenced", err)
	}
	sameRows(t, before, digest(t, under), "a retirement cut short")
	// A later collection, the collector's claim aged too, finishes it.
	age(t, dir, format.ShardDir("frozen"), 25*time.Hour)
	res, err := compactor.GC(ctx, under, nil, time.Now())
	if err != nil || !slices.Equal(res.ShardsRetired, []string{"frozen"}) {
		t.Fatalf("the next collection: retired %v, %v", res.ShardsRetired, err)
	}
	for _, k := range append(keysUnder(t, under, format.ShardDir("frozen")), keysUnder(t, under, format.FleetDir)...) {
		if !strings.Contains(k, "/gen/") {
			t.Errorf("%s is left of the retired shard", k)
		}
	}
	sameRows(t, before, digest(t, under), "finishing the retirement")
}

// A fresh read of the fleet that listed the table's versions, then, before
// it read the newest, met a fleet merge of a shard's last rows and the
// collection that retired the shard, still sees those rows: it finds the
// shard gone while the table's record of it moved on since the version it
// read, and reads again. Before, it read the older version and the shard
// as empty, and the rows were in neither (simulation seed 86108).
func TestAFleetReadRacingAMergeAndARetirementSeesTheShardsRows(t *testing.T) {
	dir := t.TempDir()
	under := rolloutsTable(t, "file://"+dir, 0, 1, 10)
	shardRows(t, under, "gone", 1, 0, 10, true)
	shardRows(t, under, "gone", 1, 10, 10, false) // a generation the table lacks
	var once sync.Once
	var raceErr error
	var retired []string
	b := fault.Wrap(under, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if op == fault.OpGet && strings.HasPrefix(key, format.VersionsDir) {
			once.Do(func() {
				if _, raceErr = fleetmerge.Merge(ctx, under, nil); raceErr != nil {
					return
				}
				for _, p := range []string{format.ShardDir("gone"), format.FleetDir} {
					age(t, dir, p, 25*time.Hour)
				}
				var res compactor.GCResult
				res, raceErr = compactor.GC(ctx, under, nil, time.Now())
				retired = res.ShardsRetired
			})
		}
		return fault.Fault{}
	}))
	rows := 0
	for rec, err := range walshard.ScanFleet(ctx, b, table.ScanOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		rows += int(rec.NumRows())
	}
	if raceErr != nil || !slices.Equal(retired, []string{"gone"}) {
		t.Fatalf("the racing merge and collection: retired %v, %v", retired, raceErr)
	}
	if rows != 30 {
		t.Fatalf("the fresh read saw %d rows, want 30 (10 of the table's, 20 of the shard's)", rows)
	}
}
