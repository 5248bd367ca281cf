package table_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// The version as of a time is the newest committed at or before it, to
// the millisecond, for every time between the first version and the last
// (checked against every version's manifest); a time before the first is
// ErrVersionNotFound naming it; one after the last is the latest; only
// the versions above a GC boundary are searched.
func TestTheVersionAsOfATimeIsTheNewestCommittedAtOrBeforeIt(t *testing.T) {
	b := memBucket(t)
	tb := newTable(t, b, 1, 10)
	for i := range 10 {
		time.Sleep(time.Duration(1+i%3) * time.Millisecond)
		rec := rollouts.Batch(testenv.Allocator(t), 42, 0, int64(100+i), 1)
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	var times []time.Time // by version - 1
	for v := uint64(1); v <= 12; v++ {
		m, err := table.ReadManifest(ctx, b, v)
		if err != nil {
			t.Fatal(err)
		}
		if v > 1 && m.Timestamp.Before(times[v-2]) {
			t.Fatalf("v%d's time %s is before v%d's %s", v, m.Timestamp, v-1, times[v-2])
		}
		times = append(times, m.Timestamp)
	}
	want := func(at time.Time) uint64 {
		var v uint64
		for i, ts := range times {
			if ts.UnixMilli() <= at.UnixMilli() {
				v = uint64(i + 1)
			}
		}
		return v
	}
	first, last := times[0], times[len(times)-1]
	for at := first; !at.After(last.Add(2 * time.Millisecond)); at = at.Add(300 * time.Microsecond) {
		s, err := table.Open(ctx, b, &table.OpenOptions{AsOf: at})
		if err != nil {
			t.Fatalf("as of %s: %v", at.Format(time.RFC3339Nano), err)
		}
		if s.Version() != want(at) {
			t.Fatalf("as of %s: v%d, want v%d", at.Format(time.RFC3339Nano), s.Version(), want(at))
		}
	}
	zero, err := table.ParseAsOf("0001-01-01T00:00:00Z", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Open(ctx, b, &table.OpenOptions{AsOf: zero}); !errors.Is(err, format.ErrVersionNotFound) {
		t.Fatalf("as of the year 1: %v, want no version (not the latest)", err)
	}
	_, err = table.VersionAsOf(ctx, b, first.Add(-time.Millisecond))
	if !errors.Is(err, format.ErrVersionNotFound) || !strings.Contains(err.Error(), "the oldest retained, v1, was committed at "+first.UTC().Format(time.RFC3339Nano)) {
		t.Fatalf("a time before the first version: %v", err)
	}
	// The changes since a time start after the version as of it, or at the
	// table's creation when it was made after it.
	if from, err := table.FromAsOf(ctx, b, first.Add(-time.Millisecond)); err != nil || from != 0 {
		t.Fatalf("changes since before the table: from v%d, %v; want 0", from, err)
	}
	if from, err := table.FromAsOf(ctx, b, times[3]); err != nil || from != want(times[3]) {
		t.Fatalf("changes since v4's time: from v%d, %v; want v%d", from, err, want(times[3]))
	}
	if err := b.PutIfAbsent(ctx, format.GCBoundaryKey(5), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	_, err = table.VersionAsOf(ctx, b, times[3])
	if !errors.Is(err, format.ErrVersionNotFound) || !strings.Contains(err.Error(), "the oldest retained, v6,") {
		t.Fatalf("a time of a version below the GC boundary: %v", err)
	}
	if _, err := table.FromAsOf(ctx, b, first.Add(-time.Millisecond)); !errors.Is(err, format.ErrVersionNotFound) {
		t.Fatalf("changes since before the table, its first versions collected: %v, want the oldest retained named", err)
	}
	if m, err := table.VersionAsOf(ctx, b, times[8]); err != nil || m.Version != want(times[8]) {
		t.Fatalf("as of v9's time above the boundary: %v %v", m, err)
	}
}

// --as-of reads RFC 3339 times, with or without fractional seconds, and
// durations before now; anything else is ErrBadAsOf listing the forms.
func TestParseAsOf(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	for s, want := range map[string]time.Time{
		"2026-12-07T09:00:00Z":      now.Add(-time.Hour),
		"2026-12-07T09:00:00.25Z":   now.Add(-time.Hour + 250*time.Millisecond),
		"2026-12-07T10:30:00+01:00": now.Add(-30 * time.Minute),
		"2h":                        now.Add(-2 * time.Hour),
		" 1h30m ":                   now.Add(-90 * time.Minute),
		"0s":                        now,
	} {
		got, err := table.ParseAsOf(s, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseAsOf(%q) = %s, %v; want %s", s, got, err, want)
		}
	}
	for _, s := range []string{"yesterday", "2026-12-07", "-2h", "2026-12-07 09:00:00", ""} {
		if _, err := table.ParseAsOf(s, now); !errors.Is(err, table.ErrBadAsOf) || !strings.Contains(err.Error(), "RFC 3339") {
			t.Errorf("ParseAsOf(%q): %v", s, err)
		}
	}
}
