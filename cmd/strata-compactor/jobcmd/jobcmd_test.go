package jobcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table"
)

var ctx = context.Background()

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func smallTable(t *testing.T, u string, frags int) blob.Bucket {
	t.Helper()
	b, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commit.Create(ctx, b, rollouts.Schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range frags {
		rec := rollouts.Batch(testenv.Allocator(t), 42, 0, int64(i*10), 10)
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	return b
}

func run(env []string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(ctx, args, env, &out, &errOut)
	return code, out.String(), errOut.String()
}

// logLines parses the JSON log lines on stderr.
func logLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(s) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestOnceCompactsAndSummarises(t *testing.T) {
	for _, u := range []string{"file://" + t.TempDir(), testenv.MinIO(t).URL(t)} {
		b := smallTable(t, u, 20)
		code, out, errOut := run(nil, "--once", "--table", u)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", u, code, errOut)
		}
		if !strings.Contains(out, "1 compacted") || !strings.Contains(out, "fragments 20 -> 1") {
			t.Fatalf("summary %q", out)
		}
		logs := logLines(t, errOut)
		if last := logs[len(logs)-1]; last["msg"] != "summary" || last["compacted"] != 1.0 {
			t.Fatalf("last log line %v", last)
		}
		st, err := compactor.ReadStatus(ctx, b, 0)
		if err != nil || st.TotalCompactions != 1 || len(st.History) != 1 || st.History[0].FragmentsAfter != 1 {
			t.Fatalf("status %+v, %v", st, err)
		}
		s, err := table.Open(ctx, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Manifest().Fragments) != 1 || s.Manifest().Rows() != 200 {
			t.Fatalf("table after the job: %d fragments, %d rows", len(s.Manifest().Fragments), s.Manifest().Rows())
		}
		// A second pass finds nothing due.
		if code, out, _ := run(nil, "--once", "--table", u); code != 0 || !strings.Contains(out, "0 compacted, 1 skipped") {
			t.Fatalf("second pass: %d %q", code, out)
		}
	}
}

func TestEnvironmentConfiguresTheJob(t *testing.T) {
	u := "file://" + t.TempDir()
	smallTable(t, u, 5)
	// min-fragments 3 from the environment: due.
	code, out, errOut := run([]string{"STRATA_TABLE=" + u, "STRATA_MIN_FRAGMENTS=3", "STRATA_ONCE=true"})
	if code != 0 || !strings.Contains(out, "1 compacted") {
		t.Fatalf("exit %d %q\n%s", code, out, errOut)
	}
}

// --memory-budget (or STRATA_MEMORY_BUDGET) bounds what the compaction
// holds at once, by its own count, which the "compacted" line logs.
func TestTheMemoryBudgetBoundsTheCompaction(t *testing.T) {
	u := "file://" + t.TempDir()
	smallTable(t, u, 20)
	code, _, errOut := run([]string{"STRATA_MEMORY_BUDGET=16777216"}, "--once", "--table", u)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	for _, l := range logLines(t, errOut) {
		if l["msg"] != "compacted" {
			continue
		}
		if peak, _ := l["peak_memory"].(float64); peak <= 0 || peak > 16<<20 {
			t.Fatalf("peak_memory %v, want within 16 MiB", l["peak_memory"])
		}
		return
	}
	t.Fatalf("no compaction logged:\n%s", errOut)
}

func TestAJobHoldingTheLeaseMakesTheOtherSkip(t *testing.T) {
	u := "file://" + t.TempDir()
	b := smallTable(t, u, 20)
	if _, err := compactor.AcquireLease(ctx, b, "other-job", time.Hour, time.Now()); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(nil, "--once", "--table", u)
	if code != 0 || !strings.Contains(out, "0 compacted, 1 skipped") || !strings.Contains(errOut, "other-job") {
		t.Fatalf("exit %d %q\n%s", code, out, errOut)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	u := "file://" + t.TempDir()
	b := smallTable(t, u, 20)
	code, _, errOut := run(nil, "--once", "--dry-run", "--table", u)
	if code != 0 || !strings.Contains(errOut, "bin 0: 20 fragments") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Manifest().Fragments) != 20 {
		t.Fatal("a dry run compacted")
	}
}

func TestTablesUnderAPrefix(t *testing.T) {
	dir := t.TempDir()
	smallTable(t, "file://"+dir+"/a", 17)
	smallTable(t, "file://"+dir+"/team/b", 17)
	code, out, errOut := run(nil, "--once", "--tables-under", "file://"+dir)
	if code != 0 || !strings.Contains(out, "2 tables: 2 compacted") {
		t.Fatalf("exit %d %q\n%s", code, out, errOut)
	}
}

// A bucket with no tables yet (a fresh deployment) is a pass that does
// nothing, not a failure of the CronJob.
func TestAnEmptyBucketIsAPassThatDoesNothing(t *testing.T) {
	code, out, errOut := run(nil, "--once", "--tables-under", "file://"+t.TempDir())
	if code != 0 || !strings.Contains(out, "0 tables") {
		t.Fatalf("exit %d %q\n%s", code, out, errOut)
	}
}

func TestUsageAndFailures(t *testing.T) {
	for _, args := range [][]string{{}, {"--table", "mem://"}, {"--once", "--interval", "1m", "--table", "mem://"}, {"--once", "--quiet-windows", "25-3", "--table", "mem://"}, {"--nope"},
		{"--once", "--lease-ttl", "1s", "--table", "mem://"}} {
		if code, _, _ := run(nil, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	// A URL with no table fails the run (exit 1) and says which.
	code, _, errOut := run(nil, "--once", "--table", "file://"+t.TempDir())
	if code != 1 || !strings.Contains(errOut, "no table here") {
		t.Fatalf("missing table: exit %d\n%s", code, errOut)
	}
}

// --parts splits the compaction: --part, or JOB_COMPLETION_INDEX as an
// Indexed Job sets it, says which part a process takes; a part out of
// range is a usage error naming the flags, and a part compacts its own bins
// only.
func TestPartsSplitTheCompaction(t *testing.T) {
	u := "file://" + t.TempDir()
	b := smallTable(t, u, 40)
	for _, args := range [][]string{{"--parts", "2", "--part", "2"}, {"--parts", "0"}} {
		if code, _, errOut := run(nil, append([]string{"--once", "--table", u}, args...)...); code != 2 || !strings.Contains(errOut, "--part") {
			t.Errorf("%q: exit %d\n%s", args, code, errOut)
		}
	}
	if code, _, errOut := run([]string{"JOB_COMPLETION_INDEX=x"}, "--once", "--table", u, "--parts", "2"); code != 2 || !strings.Contains(errOut, "JOB_COMPLETION_INDEX") {
		t.Errorf("a bad JOB_COMPLETION_INDEX: exit %d\n%s", code, errOut)
	}
	policy := compactor.Policy{TargetRows: 50}
	for i := range 2 {
		code, out, errOut := run([]string{fmt.Sprintf("JOB_COMPLETION_INDEX=%d", i)}, "--once", "--table", u, "--parts", "2", "--target-rows", "50", "--min-fragments", "2", "--no-gc")
		if code != 0 || !strings.Contains(out, "1 compacted") {
			t.Fatalf("part %d: exit %d %q\n%s", i, code, out, errOut)
		}
		m, err := table.ReadLatest(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		left := len(compactor.PlanCompaction(m, policy).Bins)
		if mine := compactor.PlanCompaction(m, compactor.Policy{TargetRows: 50, Part: compactor.Part{Index: i, Of: 2}}); len(mine.Bins) != 0 || (i == 0) != (left > 0) {
			t.Fatalf("after part %d: %d of its bins and %d of the table's left", i, len(mine.Bins), left)
		}
	}
}

// Every numeric flag declares the values it takes, and a value outside
// them, from the command line or the environment, is a usage error naming
// the flag, before any table is touched.
func TestNumericFlagsOutsideTheirRangeAreUsageErrors(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	defineFlags(fs, &jobFlags{}, new(bool))
	if free := cli.Unbounded(fs); len(free) > 0 {
		t.Fatalf("numeric flags without a range: %q", free)
	}
	u := "file://" + t.TempDir()
	smallTable(t, u, 1)
	for _, c := range []struct {
		env  []string
		args string
		says string
	}{
		{nil, "--min-fragments 0", "--min-fragments 0: want at least 1"},
		{nil, "--max-source-fragments -5", "--max-source-fragments -5: want at least 1"},
		{nil, "--keep-versions 0", "--keep-versions 0: want at least 1"},
		{nil, "--adopt-after -1s", "--adopt-after -1s: want at least 0s"},
		{nil, "--retain -1h", "--retain -1h0m0s: want at least 5m0s"},
		// 0 never stands for the default: below the floor, it is refused.
		{nil, "--retain 0", "--retain 0s: want at least 5m0s"},
		{nil, "--safety-age 0", "--safety-age 0s: want at least 5m0s"},
		{[]string{"STRATA_CONSUMER_RETENTION=0s"}, "", "--consumer-retention 0s: want at least 5m0s"},
		{nil, "--lease-ttl 1s", "--lease-ttl 1s: want at least 10s"},
		{[]string{"STRATA_TARGET_ROWS=-5"}, "", "--target-rows -5: want at least 1"},
		{nil, "--memory-budget 1000", "--memory-budget 1000: want at least 16777216"},
		{[]string{"STRATA_MEMORY_BUDGET=256MiB"}, "", "256MiB"},
	} {
		args := append([]string{"--once", "--table", u}, strings.Fields(c.args)...)
		if code, _, errOut := run(c.env, args...); code != 2 || !strings.Contains(errOut, c.says) {
			t.Errorf("%v %s: exit %d, %s", c.env, c.args, code, errOut)
		}
	}
	if code, _, errOut := run(nil, "--interval", "-1s", "--table", u); code != 2 || !strings.Contains(errOut, "--interval -1s: want at least 0s") {
		t.Errorf("--interval -1s: exit %d, %s", code, errOut)
	}
}

// --iceberg keeps each table's Iceberg view up to date every pass, on a
// folder and on MinIO: after a pass that compacted, the view's current
// snapshot is the compaction's version and names its one fragment.
func TestIcebergKeepsTheViewUpToDate(t *testing.T) {
	for _, u := range []string{"file://" + t.TempDir(), testenv.MinIO(t).URL(t)} {
		b := smallTable(t, u, 20)
		code, _, errOut := run(nil, "--once", "--iceberg", "--table", u)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", u, code, errOut)
		}
		var logged map[string]any
		for _, l := range logLines(t, errOut) {
			if l["msg"] == "iceberg" {
				logged = l
			}
		}
		latest, err := table.LatestVersion(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if logged == nil || logged["current"] != float64(latest) || logged["written"] != true {
			t.Fatalf("%s: iceberg log line %v (latest version %d)\n%s", u, logged, latest, errOut)
		}
		hint, err := b.Get(ctx, layout.HintKey)
		if err != nil || string(hint) != "1" {
			t.Fatalf("%s: hint %q, %v", u, hint, err)
		}
		// A second pass with nothing new writes no new metadata.
		if code, _, errOut := run(nil, "--once", "--iceberg", "--table", u); code != 0 {
			t.Fatalf("%s: exit %d\n%s", u, code, errOut)
		}
		if _, err := b.Get(ctx, layout.MetadataKey(2)); err == nil {
			t.Fatalf("%s: a pass with nothing new wrote new metadata", u)
		}
	}
}
