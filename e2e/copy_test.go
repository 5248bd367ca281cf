package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
)

// strata copy of a 1,000-version table from MinIO to a folder, killed
// three times mid-copy and run again to its end: the copy reads as the
// source at every version checked, strata repair finds nothing to do on
// it, and a second, incremental run after ten more versions makes a
// small fraction of the first's requests (counted in-process).
func TestCopyA1000VersionTableFromMinIO(t *testing.T) {
	t.Parallel() // it waits on processes and the store most of its time
	ctx := context.Background()
	srcURL := testenv.MinIO(t).URL(t)
	src, err := blob.Open(ctx, srcURL)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.BinaryTypes.String}}, nil)
	if _, _, err := engine.Create(ctx, src, schema, "copy-test", nil); err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(ctx, src, &engine.Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	appendOne := func(i int) {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer bld.Release()
		bld.Field(0).(*array.Int64Builder).Append(int64(i))
		bld.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row %d", i))
		rec := bld.NewRecordBatch()
		defer rec.Release()
		if _, err := db.Append(ctx, engine.AppendOptions{}, rec); err != nil {
			t.Fatal(err)
		}
	}
	for i := 2; i <= 1000; i++ {
		appendOne(i)
	}
	dir := t.TempDir()
	dstURL := "file://" + filepath.Join(dir, "copy")
	strataBin := filepath.Join(bins, "strata")
	for kill := range 3 {
		cmd := exec.Command(strataBin, "copy", srcURL, dstURL, "--parallel", "2")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(700+400*kill) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		have, _ := table.LatestVersion(ctx, mustOpenURL(t, dstURL))
		t.Logf("killed %d: the copy holds versions up to %d", kill+1, have)
	}
	out, err := exec.Command(strataBin, "copy", srcURL, dstURL).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "(the copy holds 1 to 1000)") {
		t.Fatalf("the copy run to its end: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	for _, v := range []string{"1000", "777", "123", "2"} {
		a, aerr := exec.Command(strataBin, "scan", srcURL, "--version", v, "--format", "jsonl").Output()
		b, berr := exec.Command(strataBin, "scan", dstURL, "--version", v, "--format", "jsonl").Output()
		if aerr != nil || berr != nil || string(a) != string(b) || len(a) == 0 {
			t.Fatalf("version %s: the copy reads %d bytes (%v), the source %d (%v)", v, len(b), berr, len(a), aerr)
		}
	}
	if out, err := exec.Command(strataBin, "repair", dstURL).CombinedOutput(); err != nil {
		t.Fatalf("strata repair on the copy: %v\n%s", err, out)
	}

	// The requests of a whole copy, and of the next one after ten
	// versions.
	count := func() (int64, string) {
		s := fault.Wrap(src, fault.Never())
		d, err := blob.Open(ctx, "file://"+filepath.Join(dir, "counted"))
		if err != nil {
			t.Fatal(err)
		}
		dc := fault.Wrap(d, fault.Never())
		res, err := engine.Copy(ctx, s, dc, engine.CopyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Requests() + dc.Requests(), fmt.Sprintf("%d versions, %d objects: %d requests to the source, %d to the copy", res.Versions, res.Objects, s.Requests(), dc.Requests())
	}
	first, firstWords := count()
	for i := 1001; i <= 1010; i++ {
		appendOne(i)
	}
	second, secondWords := count()
	t.Logf("the first copy: %s; the second, incremental: %s", firstWords, secondWords)
	if second*20 > first {
		t.Fatalf("the incremental copy made %d requests, the whole one %d", second, first)
	}
}

func mustOpenURL(t *testing.T, u string) blob.Bucket {
	t.Helper()
	b, err := blob.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
