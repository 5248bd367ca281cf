package compactor_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// PlanGC is a function of what a collection read and the clock: no
// requests. Versions 1..6 written an hour apart (v3 created again after
// v4: a ghost), a tag on v1, and objects of every kind and age.
func TestPlanGCDecidesFromWhatWasRead(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(hoursAgo float64) time.Time { return now.Add(-time.Duration(hoursAgo * float64(time.Hour))) }
	manifest := func(keys ...string) *format.Manifest {
		m := &format.Manifest{Shards: map[string]format.ShardMark{"w1": {Watermark: 2}}}
		for i, k := range keys {
			m.Fragments = append(m.Fragments, format.Fragment{ID: uint64(i), Key: k})
		}
		return m
	}
	st := compactor.GCState{
		Versions:  []compactor.VersionAge{{6, at(1)}, {5, at(2)}, {4, at(3)}, {3, at(0.5)}, {2, at(5)}, {1, at(6)}},
		Collected: 3, // a collection took v3, which a stalled writer made again
		Tags:      []table.Tag{{Name: "keep", Version: 1}},
		Manifests: map[uint64]*format.Manifest{
			6: manifest("data/new", "_shards/w1/gen/00000000000000000002-e1-aaaaaaaaaaaa.parquet"),
			5: manifest("data/new", "data/mid"),
			1: manifest("data/first"),
		},
		Objects: []blob.ObjectInfo{
			{Key: "data/new", ModTime: at(1)},
			{Key: "data/mid", ModTime: at(2)},
			{Key: "data/first", ModTime: at(6)},
			{Key: "data/gone-old", ModTime: at(4), Size: 10},
			{Key: "data/gone-young", ModTime: at(0.2)},
			{Key: "_shards/w1/gen/00000000000000000001-e1-bbbbbbbbbbbb.parquet", ModTime: at(4), Size: 7},
			{Key: "_shards/w1/gen/00000000000000000003-e1-cccccccccccc.parquet", ModTime: at(4)},
			{Key: "_shards/w1/wal/18446744073709551614", ModTime: at(4)},
			{Key: "_shards/w1/wal/18446744073709551612", ModTime: at(4)},
		},
	}
	plan := compactor.PlanGC(st, compactor.GCPolicy{KeepVersions: 2, RetainFor: 90 * time.Minute, SafetyAge: time.Hour}, now)
	if !slices.Equal(plan.Ghosts, []uint64{3}) || plan.Boundary != 4 {
		t.Fatalf("ghosts %v, boundary v%d; want [3] and v4", plan.Ghosts, plan.Boundary)
	}
	if !slices.Equal(plan.Kept, []uint64{6, 5, 1}) || !slices.Equal(plan.Versions, []uint64{2, 4}) {
		t.Fatalf("kept %v, deleted %v; want [6 5 1] and [2 4]", plan.Kept, plan.Versions)
	}
	var keys []string
	for _, o := range plan.Objects {
		keys = append(keys, o.Key)
	}
	// Unreferenced and old enough: data/gone-old, the merged generation 1
	// and the WAL entry at position 1 (generation 3 and the entry at
	// position 3 are above the watermark; data/gone-young is too young).
	if want := []string{"data/gone-old", "_shards/w1/gen/00000000000000000001-e1-bbbbbbbbbbbb.parquet", "_shards/w1/wal/18446744073709551614"}; !slices.Equal(keys, want) {
		t.Fatalf("objects %v, want %v", keys, want)
	}
	if again := compactor.PlanGC(st, compactor.GCPolicy{KeepVersions: 2, RetainFor: 90 * time.Minute, SafetyAge: time.Hour}, now); !slices.Equal(again.Versions, plan.Versions) {
		t.Fatal("the same inputs gave another plan")
	}
	if out := plan.String(); !strings.Contains(out, "boundary v4") || !strings.Contains(out, "data/gone-old") || !strings.Contains(out, "17 bytes") {
		t.Fatalf("the printed plan:\n%s", out)
	}
	// The floors hold in the plan too: a retention of a minute is five.
	floor := compactor.PlanGC(st, compactor.GCPolicy{KeepVersions: 1, RetainFor: time.Minute, SafetyAge: time.Minute}, now.Add(-(4*time.Hour - 3*time.Minute)))
	for _, o := range floor.Objects {
		t.Fatalf("%s, written 3 minutes before, goes under a 5-minute floor", o.Key)
	}
}
