package command

import (
	"bytes"
	"strings"
	"testing"
)

func TestProgressPrintsPlainLinesOffATerminal(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, "append", "rows", 100)
	p.Add(40) // the first update draws at once
	p.Add(60)
	p.Done()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "append: 40/100 rows") || !strings.HasPrefix(lines[1], "append: 100/100 rows") {
		t.Fatalf("progress lines:\n%s", buf.String())
	}
	if strings.Contains(buf.String(), "\r") {
		t.Fatal("a bar was drawn to something that is not a terminal")
	}
}
