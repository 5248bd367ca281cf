package command

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/internal/ingest"
)

func TestProgressWritesNothingOffATerminal(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, "append", "rows", 100)
	p.Add(40)
	p.Add(60)
	p.Done()
	if buf.Len() != 0 {
		t.Fatalf("progress off a terminal wrote %q", buf.String())
	}
}

// A JSON lines file's bytes are counted as they are read, many times for
// a large file, not once at its end: a single large append moves the bar.
func TestReadFileReportsBytesAsItReads(t *testing.T) {
	path := t.TempDir() + "/big.jsonl"
	var b bytes.Buffer
	for i := range 100_000 {
		fmt.Fprintf(&b, "{\"id\":%d}\n", i)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	var calls, total int64
	rows := 0
	for rec, err := range readFile(path, "jsonl", schema, ingest.Options{}, func(n int64) { calls++; total += n }) {
		if err != nil {
			t.Fatal(err)
		}
		rows += int(rec.NumRows())
		rec.Release()
	}
	if rows != 100_000 || total != int64(b.Len()) || calls < 10 {
		t.Fatalf("%d rows; %d bytes reported in %d calls, the file has %d", rows, total, calls, b.Len())
	}
}

// On a terminal the bar shows bytes in binary units and the share done,
// redrawn in place, and ends its line when done.
func TestProgressDrawsBytesOnATerminal(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, "compact", "bytes", 0)
	p.tty = true
	p.Set(512<<20, 1<<30)
	p.Done()
	out := buf.String()
	for _, want := range []string{"\rcompact [", " 50% 512.0 MiB/1.0 GiB ", "\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the bar %q lacks %q", out, want)
		}
	}
}
