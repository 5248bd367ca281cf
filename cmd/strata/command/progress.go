package command

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progress shows long work as a bar redrawn in place, on a terminal only:
// to anything else (logs, pipes, CI) it writes nothing, so that output
// stays what the command answers.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	label    string
	unit     string
	total    int64
	done     int64
	tty      bool
	start    time.Time
	lastDraw time.Time
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func newProgress(w io.Writer, label, unit string, total int64) *progress {
	return &progress{w: w, label: label, unit: unit, total: total, tty: isTerminal(w), start: time.Now()}
}

// Add records n more units done.
func (p *progress) Add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	if p.tty && time.Since(p.lastDraw) >= 100*time.Millisecond {
		p.drawLocked(false)
	}
}

// Done draws the final state and ends the line.
func (p *progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drawLocked(true)
}

func (p *progress) drawLocked(final bool) {
	p.lastDraw = time.Now()
	secs := time.Since(p.start).Seconds()
	rate := float64(p.done) / max(secs, 1e-9)
	if !p.tty {
		return
	}
	const width = 30
	frac := 0.0
	if p.total > 0 {
		frac = min(float64(p.done)/float64(p.total), 1)
	}
	bar := strings.Repeat("=", int(frac*width))
	if len(bar) < width {
		bar += ">" + strings.Repeat(" ", width-len(bar)-1)
	}
	fmt.Fprintf(p.w, "\r%s [%s] %3.0f%% %d/%d %s %.0f/s", p.label, bar, 100*frac, p.done, p.total, p.unit, rate)
	if final {
		fmt.Fprintln(p.w)
	}
}
