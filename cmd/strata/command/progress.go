package command

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
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

// ProgressBar draws the progress of long work on w when w is a terminal
// (nothing otherwise): set tells it done of total units (bytes are shown
// in KiB, MiB, GiB), finish ends its line.
func ProgressBar(w io.Writer, label, unit string) (set func(done, total int64), finish func()) {
	p := newProgress(w, label, unit, 0)
	var told atomic.Bool
	set = func(done, total int64) {
		told.Store(true)
		p.Set(done, total)
	}
	return set, func() {
		if told.Load() {
			p.Done()
		}
	}
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

// Set records done of total units done (the total may change as work is
// planned again).
func (p *progress) Set(done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done, p.total = done, total
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
	amounts := fmt.Sprintf("%d/%d %s %.0f/s", p.done, p.total, p.unit, rate)
	if p.unit == "bytes" {
		amounts = fmt.Sprintf("%s/%s %s/s", bytesIEC(float64(p.done)), bytesIEC(float64(p.total)), bytesIEC(rate))
	}
	fmt.Fprintf(p.w, "\r%s [%s] %3.0f%% %s ", p.label, bar, 100*frac, amounts)
	if final {
		fmt.Fprintln(p.w)
	}
}

// bytesIEC formats n bytes in B, KiB, MiB or GiB.
func bytesIEC(n float64) string {
	if n < 1024 {
		return fmt.Sprintf("%.0f B", n)
	}
	for _, u := range []string{"KiB", "MiB", "GiB"} {
		n /= 1024
		if n < 1024 || u == "GiB" {
			return fmt.Sprintf("%.1f %s", n, u)
		}
	}
	return ""
}
