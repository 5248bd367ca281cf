package compactor

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stratadb/strata/table/format"
)

// Window is a range of UTC hours, [Start, End), during which compaction
// must not run. Start > End wraps midnight: {22, 6} is 22:00–06:00.
type Window struct {
	Start, End int
}

// ParseWindow reads "22-6" (hours, UTC).
func ParseWindow(s string) (Window, error) {
	a, b, ok := strings.Cut(s, "-")
	start, err1 := strconv.Atoi(strings.TrimSpace(a))
	end, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || start < 0 || start > 23 || end < 0 || end > 24 {
		return Window{}, fmt.Errorf("compactor: quiet window %q: want START-END in UTC hours, such as 22-6", s)
	}
	return Window{start, end}, nil
}

// Contains reports whether the hour of t (in UTC) falls in the window.
func (w Window) Contains(t time.Time) bool {
	h := t.UTC().Hour()
	switch {
	case w.Start == w.End:
		return false // empty
	case w.Start < w.End:
		return h >= w.Start && h < w.End
	default: // wraps midnight
		return h >= w.Start || h < w.End
	}
}

func (w Window) String() string { return fmt.Sprintf("%02d-%02d UTC", w.Start, w.End) }

// Policy decides when and how to compact. Zero values mean defaults.
type Policy struct {
	// MinFragments: compaction is due once the table has at least this
	// many small fragments (see SmallRows; default 16).
	MinFragments int
	// QuietWindows: no compaction while the clock is in one of them.
	QuietWindows []Window
	// TargetRows and TargetBytes bound an output fragment (defaults
	// 1,000,000 rows and 512 MiB).
	TargetRows  int64
	TargetBytes int64
	// MaxSourceFragments and MaxSourceBytes bound one run (defaults 1,024
	// fragments and 8 GiB), so a run's time stays bounded.
	MaxSourceFragments int
	MaxSourceBytes     int64
	// DeletedFraction: a fragment with at least this fraction of its rows
	// deleted is rewritten even alone, to drop them (default 0.2).
	DeletedFraction float64
	// SmallRows and SmallBytes: a fragment below both is small, a source
	// for compaction (defaults a quarter of TargetRows and TargetBytes).
	// A fragment past them is not rewritten again, so a row is rewritten
	// a few times at most however often small fragments arrive, instead of
	// once per run as the output of the last run grows.
	SmallRows  int64
	SmallBytes int64
	// Part, when Of is above 1, makes this process one of several that
	// share the table's compaction: it compacts only its bins, under its
	// own lease (see Part). The per-run bounds are the part's.
	Part Part
}

// withDefaults returns p with zero values replaced by defaults.
func (p Policy) withDefaults() Policy {
	if p.MinFragments <= 0 {
		p.MinFragments = 16
	}
	if p.TargetRows <= 0 {
		p.TargetRows = 1_000_000
	}
	if p.TargetBytes <= 0 {
		p.TargetBytes = 512 << 20
	}
	if p.MaxSourceFragments <= 0 {
		p.MaxSourceFragments = 1024
	}
	if p.MaxSourceBytes <= 0 {
		p.MaxSourceBytes = 8 << 30
	}
	if p.DeletedFraction <= 0 {
		p.DeletedFraction = 0.2
	}
	if p.SmallRows <= 0 {
		p.SmallRows = max(p.TargetRows/4, 1)
	}
	if p.SmallBytes <= 0 {
		p.SmallBytes = max(p.TargetBytes/4, 1)
	}
	return p
}

func (p Policy) small(f *format.Fragment) bool {
	return f.Rows < p.SmallRows && f.Bytes < p.SmallBytes
}

// rewrites: f is a source of compaction, to bin with its neighbours —
// small, mostly deleted rows, or not sorted by the table's cluster key —
// and not larger than a run may read (which would stop every run at it).
func (p Policy) rewrites(f *format.Fragment, key *clusterKey) bool {
	return f.Bytes <= p.MaxSourceBytes && (p.small(f) || p.mostlyDeleted(f) || key.unsorted(f))
}

// rewritesAlone: f is worth rewriting in a bin of its own.
func (p Policy) rewritesAlone(f *format.Fragment, key *clusterKey) bool {
	return f.Bytes <= p.MaxSourceBytes && (p.mostlyDeleted(f) || key.unsorted(f))
}

func (p Policy) mostlyDeleted(f *format.Fragment) bool {
	return f.Rows > 0 && f.Deletion != nil && float64(f.Deletion.Count)/float64(f.Rows) >= p.DeletedFraction
}

// ShouldCompact reports whether a compaction is due for the table state m
// at time now, and why (or why not).
func ShouldCompact(m *format.Manifest, p Policy, now time.Time) (bool, string) {
	p = p.withDefaults()
	for _, w := range p.QuietWindows {
		if w.Contains(now) {
			return false, fmt.Sprintf("in quiet window %s", w)
		}
	}
	key := clusterOf(m)
	small, deleted, unsorted := 0, 0, 0
	for i := range m.Fragments {
		f := &m.Fragments[i]
		switch {
		case !p.rewrites(f, key):
		case p.small(f):
			small++
		case key.unsorted(f):
			unsorted++
		}
		if p.rewritesAlone(f, key) && p.mostlyDeleted(f) {
			deleted++
		}
	}
	switch {
	case small >= p.MinFragments:
		return true, fmt.Sprintf("%d small fragments (min %d)", small, p.MinFragments)
	case deleted > 0:
		return true, fmt.Sprintf("%d fragments with at least %.0f%% of rows deleted", deleted, 100*p.DeletedFraction)
	case unsorted > 0:
		return true, fmt.Sprintf("%d large fragments not sorted by the cluster key", unsorted)
	}
	return false, fmt.Sprintf("%d small fragments, below min %d", small, p.MinFragments)
}
