package commit_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
)

var ctx = context.Background()

var idSchema = arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)

func idBatch(ids ...int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(testenv.Arrow, idSchema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
	return b.NewRecordBatch()
}

const appenderChild = "commit-appender"

func TestMain(m *testing.M) {
	testenv.RegisterChild(appenderChild, func() int {
		args := testenv.ChildArgs() // url worker appends
		w, _ := strconv.Atoi(args[1])
		n, _ := strconv.Atoi(args[2])
		b, err := blob.Open(ctx, args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		versions, err := appendMany(b, w, n)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for _, v := range versions {
			fmt.Println(v)
		}
		return 0
	})
	os.Exit(testenv.Main(m))
}

// appendMany makes n one-row appends with ids w*1000+i through a handle
// of its own, and returns the versions they landed at.
func appendMany(b blob.Bucket, w, n int) ([]uint64, error) {
	tb, err := commit.OpenTable(ctx, b, &commit.Options{Writer: fmt.Sprintf("w%d", w), Budget: 2 * time.Minute, MaxAttempts: 1000})
	if err != nil {
		return nil, err
	}
	var versions []uint64
	for i := range n {
		rec := idBatch(int64(w*1000 + i))
		res, err := tb.Append(ctx, rec)
		rec.Release()
		if err != nil {
			return versions, fmt.Errorf("writer %d append %d: %w", w, i, err)
		}
		versions = append(versions, res.Version)
	}
	return versions, nil
}

func createIDTable(t *testing.T, b blob.Bucket) {
	t.Helper()
	if _, err := commit.Create(ctx, b, idSchema, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// checkTable asserts the table holds exactly the ids writers×n appends
// made, once each, at contiguous versions 2 … 1+writers×n.
func checkTable(t *testing.T, b blob.Bucket, writers, n int, versions []uint64) {
	t.Helper()
	want := writers * n
	slices.Sort(versions)
	for i, v := range versions {
		if v != uint64(i+2) {
			t.Fatalf("acknowledged versions are not 2…%d: position %d holds v%d", want+1, i, v)
		}
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version() != uint64(want+1) {
		t.Fatalf("latest version %d, want %d", s.Version(), want+1)
	}
	for v := uint64(1); v <= s.Version(); v++ { // contiguous: every version exists
		if _, err := table.ReadManifest(ctx, b, v); err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
	}
	seen := map[int64]int{}
	for rec, err := range s.Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range rec.Column(0).(*array.Int64).Int64Values() {
			seen[id]++
		}
	}
	for w := range writers {
		for i := range n {
			if c := seen[int64(w*1000+i)]; c != 1 {
				t.Fatalf("id %d appears %d times", w*1000+i, c)
			}
		}
	}
	if len(seen) != want || s.Manifest().Rows() != int64(want) {
		t.Fatalf("%d distinct ids, %d rows; want %d", len(seen), s.Manifest().Rows(), want)
	}
}

func goroutineAppends(t *testing.T, b blob.Bucket, writers, n int) {
	createIDTable(t, b)
	var mu sync.Mutex
	var all []uint64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			vs, err := appendMany(b, w, n)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			all = append(all, vs...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	checkTable(t, b, writers, n, all)
}

func open(t testing.TB, u string) blob.Bucket {
	b, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestEightGoroutinesAppendMem(t *testing.T) { goroutineAppends(t, open(t, "mem://"), 8, 50) }
func TestEightGoroutinesAppendFile(t *testing.T) {
	goroutineAppends(t, open(t, "file://"+t.TempDir()), 8, 50)
}
func TestEightGoroutinesAppendMinIO(t *testing.T) {
	goroutineAppends(t, open(t, testenv.MinIO(t).URL(t)), 8, 50)
}

func processAppends(t *testing.T, u string) {
	b := open(t, u)
	createIDTable(t, b)
	const procs, n = 4, 50
	outs := make([]bytes.Buffer, procs)
	errs := make([]bytes.Buffer, procs)
	var wg sync.WaitGroup
	for p := range procs {
		cmd := testenv.ChildCommand(appenderChild, u, strconv.Itoa(p), strconv.Itoa(n))
		cmd.Stdout, cmd.Stderr = &outs[p], &errs[p]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := cmd.Wait(); err != nil {
				t.Errorf("process %d: %v\n%s", p, err, errs[p].String())
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var all []uint64
	for p := range procs {
		sc := bufio.NewScanner(strings.NewReader(outs[p].String()))
		for sc.Scan() {
			v, err := strconv.ParseUint(sc.Text(), 10, 64)
			if err != nil {
				t.Fatalf("process %d printed %q", p, sc.Text())
			}
			all = append(all, v)
		}
	}
	checkTable(t, b, procs, n, all)
}

func TestFourProcessesAppendFile(t *testing.T) { processAppends(t, "file://"+t.TempDir()) }
func TestFourProcessesAppendMinIO(t *testing.T) {
	processAppends(t, testenv.MinIO(t).URL(t))
}

func TestSnapshotReadsDoNotChangeWhileWritersCommit(t *testing.T) {
	b := open(t, "mem://")
	createIDTable(t, b)
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		rec := idBatch(int64(i))
		_, _ = tb.Append(ctx, rec)
		rec.Release()
	}
	pinned, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	read := func() []int64 {
		var ids []int64
		for rec, err := range pinned.Scan(ctx, table.ScanOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
		}
		return ids
	}
	before := read()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			other, err := commit.OpenTable(ctx, b, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 25 {
				rec := idBatch(int64(1000*(w+1) + i))
				if _, err := other.Append(ctx, rec); err != nil {
					t.Error(err)
				}
				rec.Release()
			}
		})
	}
	for range 20 {
		if got := read(); !slices.Equal(got, before) {
			t.Fatalf("pinned v%d changed while writers committed: %d rows, had %d", pinned.Version(), len(got), len(before))
		}
	}
	wg.Wait()
	latest, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Version() != pinned.Version()+100 {
		t.Fatalf("latest v%d, want v%d", latest.Version(), pinned.Version()+100)
	}
	if got := read(); !slices.Equal(got, before) {
		t.Fatal("pinned version changed after 100 more commits")
	}
	reopened, err := table.Open(ctx, b, &table.OpenOptions{Version: pinned.Version()})
	if err != nil {
		t.Fatal(err)
	}
	if reopened.Manifest().Rows() != int64(len(before)) {
		t.Fatal("reopening the pinned version gives other rows")
	}
}
