package job_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/job"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// Tables whose names hold "_versions" are found and served like any
// other. Before, discovery looked for the first "_versions" in each key:
// it skipped run_versions and job_versions — a dead worker's 920
// acknowledged rows stayed out of run_versions while t got all of its
// 1,020 — and took a table named _versions for the bucket's root, so every
// pass failed ("no table here") and wrote a lease at the root.
func TestTablesNamedWithVersionsAreFoundAndTheirDeadWorkersAdopted(t *testing.T) {
	dir := t.TempDir()
	root := "file://" + dir
	acked := map[string]int64{"t": 1020, "run_versions": 920, "job_versions": 510, "_versions": 330}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range acked {
			if !yield(n) {
				return
			}
		}
	})
	for i, name := range names {
		b, err := blob.Open(ctx, root+"/"+name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
			t.Fatal(err)
		}
		s := shardWithRows(t, b, "dead", i, int(acked[name]/10))
		s.Close() // dies: its rows are in its WAL only
		b.Close()
	}
	found, err := engine.DiscoverTables(ctx, blob.Open, root)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, name := range names {
		want = append(want, root+"/"+name)
	}
	if !slices.Equal(found, want) {
		t.Fatalf("found %q\nwant %q", found, want)
	}
	time.Sleep(50 * time.Millisecond) // quiet for longer than the adoption age
	sum, err := job.RunOnce(ctx, &job.Options{Tables: found, AdoptAfter: 20 * time.Millisecond, NoGC: true,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil || sum.Failed != 0 || sum.Adopted != len(names) {
		t.Fatalf("the pass: %+v %v", sum, err)
	}
	for _, name := range names {
		b, err := blob.Open(ctx, root+"/"+name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := table.ReadLatest(ctx, b)
		b.Close()
		if err != nil || m.Rows() != acked[name] {
			t.Errorf("%s holds %d rows after the pass (%v), want the %d its dead worker acknowledged", name, m.Rows(), err, acked[name])
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "_compactor")); !os.IsNotExist(err) {
		t.Fatalf("the pass wrote at the bucket's root: %v", err)
	}
}

// Discovery lists folders, never what tables hold: the requests to find
// two tables do not grow when one holds thousands of objects more.
func TestDiscoveryDoesNotListEveryObject(t *testing.T) {
	requests := func(extra int) blob.Stats {
		dir := t.TempDir()
		for _, name := range []string{"runs", "team/eval"} {
			rolloutsTable(t, "file://"+dir+"/"+name, 0, 1, 10).Close()
		}
		// Objects written straight into the folder: a big table's.
		data := filepath.Join(dir, "runs", "data")
		for range extra {
			if err := os.WriteFile(filepath.Join(data, format.NewID()+".parquet"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, err := blob.Open(ctx, "file://"+dir)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		before, _ := blob.StatsOf(b)
		found, err := engine.DiscoverTables(ctx, func(context.Context, string) (blob.Bucket, error) { return keepOpen{b}, nil }, "file://"+dir)
		if err != nil || len(found) != 2 {
			t.Fatalf("found %q %v", found, err)
		}
		after, _ := blob.StatsOf(b)
		return after.Sub(before)
	}
	few, many := requests(0), requests(4000)
	t.Logf("discovering 2 tables: %d requests (%d LISTs); with 4,000 objects more in one: %d (%d LISTs)", few.Requests(), few.Lists, many.Requests(), many.Lists)
	// The root, runs (its folder and its _versions/), team, team/eval.
	if many != few || many.Lists != 6 || many.Requests() != 6 {
		t.Fatalf("discovery: %+v with 4,000 objects more, %+v without; want the same 6 LISTs", many, few)
	}
}

// A Job in interval mode over the tables under a bucket serves a table
// created after it started, from the pass after it next looks, and stops
// serving one that is gone. Before, it looked once at start: a compactor
// Deployment started before its tables (the README's deployment) merged,
// adopted and compacted nothing, ever.
func TestALoopServesTablesCreatedAfterItStarted(t *testing.T) {
	dir := t.TempDir()
	root := "file://" + dir
	var log strings.Builder
	o := job.Options{Under: []string{root}, Rediscover: 50 * time.Millisecond, NoGC: true,
		Log:    slog.New(slog.NewTextHandler(&syncWriter{w: &log}, nil)),
		Policy: engine.Policy{MinFragments: 4}}
	loopFor(t, &o)
	time.Sleep(100 * time.Millisecond) // a few passes over no table
	b := rolloutsTable(t, root+"/late", 1, 8, 10)
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := table.ReadLatest(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Fragments) < 8 {
			if m.Rows() != 80 {
				t.Fatalf("the compacted table holds %d rows, want 80", m.Rows())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a table created after the Job started was never compacted: %d fragments", len(m.Fragments))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.Rename(filepath.Join(dir, "late"), filepath.Join(t.TempDir(), "moved")); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(syncString(&log), "gone=["+root+"/late]") {
		if time.Now().After(deadline) {
			t.Fatalf("a table removed is still served:\n%s", syncString(&log))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var logMu sync.Mutex

type syncWriter struct{ w *strings.Builder }

func (s *syncWriter) Write(p []byte) (int, error) {
	logMu.Lock()
	defer logMu.Unlock()
	return s.w.Write(p)
}

func syncString(b *strings.Builder) string {
	logMu.Lock()
	defer logMu.Unlock()
	return b.String()
}

// A Job that cannot list the tables under its bucket URL fails the pass
// with a failed outcome named by that URL, so that the failures' metrics
// and alerts see it, rather than passing over no table.
func TestAFailedListingOfTablesIsAFailedOutcome(t *testing.T) {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	refused := fault.Wrap(b, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
		if op == fault.OpList {
			return fault.Fault{Action: fault.Fail}
		}
		return fault.Fault{}
	}))
	var told job.Summary
	sum, err := job.RunOnce(ctx, &job.Options{Under: []string{"s3://lake"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Open:   func(context.Context, string) (blob.Bucket, error) { return refused, nil },
		OnPass: func(s job.Summary, _ time.Duration) { told = s }})
	if err == nil || sum.Failed != 1 || len(told.Outcomes) != 1 || told.Outcomes[0].Table != "s3://lake" || told.Outcomes[0].Err == nil {
		t.Fatalf("a pass that could not list: %+v, told %+v, %v", sum, told, err)
	}
}
