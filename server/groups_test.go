package server_test

import (
	"maps"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/server"
)

// Members of a consumer group over HTTP: each read answers the member's
// share with an ack; the group records a share when it comes back with
// the next read, so a member that dies before that has its units read
// again by another once its lease lapses, and a member that leaves gives
// its partitions back at once. Together the members' reads hold every
// appended row, and a unit read twice holds the same rows.
func TestGroupMembersOverHTTP(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	if _, err := f.c.CreateTable(ctx, "t", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	appendSome := func(n int) {
		t.Helper()
		for range n {
			rec := rollouts.Batch(testenv.Allocator(t), 42, 0, next, 10)
			next += 10
			if _, err := f.c.Append(ctx, "t", rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
			if err := f.c.CheckpointLSM(ctx, "t"); err != nil {
				t.Fatal(err)
			}
		}
	}
	type unit struct{ version, unit uint64 }
	sink := map[unit]map[int64]int{}
	again := 0
	read := func(member, ack string) (string, int) {
		t.Helper()
		recs, nextAck, err := f.c.GroupChanges(ctx, "t", "g", member, client.GroupOptions{Ack: ack, Lease: time.Second, Columns: []string{"id"}})
		if err != nil {
			t.Fatalf("%s: %v", member, err)
		}
		got := map[unit]map[int64]int{}
		rows := 0
		for _, rec := range recs {
			ids := rec.Column(0).(*array.Int64)
			vs := rec.Column(2).(*array.Uint64)
			us := rec.Column(3).(*array.Uint64)
			if rec.Schema().Field(3).Name != "_unit" || rec.Column(1).(*array.String).Value(0) != "insert" {
				t.Fatalf("columns %v", rec.Schema())
			}
			for i := range ids.Len() {
				k := unit{vs.Value(i), us.Value(i)}
				if got[k] == nil {
					got[k] = map[int64]int{}
				}
				got[k][ids.Value(i)]++
				rows++
			}
			rec.Release()
		}
		for k, ids := range got {
			if have, ok := sink[k]; ok {
				again++
				if !maps.Equal(have, ids) {
					t.Fatalf("unit %+v read again with other rows", k)
				}
			}
			sink[k] = ids
		}
		return nextAck, rows
	}
	appendSome(6)
	a0, n0 := read("m0", "") // alone: every unit
	if n0 != 60 || a0 == "" {
		t.Fatalf("m0 alone read %d rows, ack %q", n0, a0)
	}
	a0, n0 = read("m0", a0) // acknowledged: nothing new
	if n0 != 0 || a0 != "" {
		t.Fatalf("m0 read %d rows after its ack, ack %q", n0, a0)
	}
	appendSome(8)
	a1, _ := read("m1", "") // joins: its share of the new units
	a0, _ = read("m0", "")
	read("m1", a1)
	read("m0", a0)
	if len(sink) != 14 {
		t.Fatalf("after two members read: %d units, want 14", len(sink))
	}
	// m0 reads and dies before acknowledging; m1 reads its units once
	// m0's lease lapsed.
	appendSome(8)
	read("m0", "")
	time.Sleep(1100 * time.Millisecond)
	a1, _ = read("m1", "") // m0 lapsed: m1 owns every partition
	read("m1", a1)
	if len(sink) != 22 || again == 0 {
		t.Fatalf("after m0 died: %d units (want 22), %d read again", len(sink), again)
	}
	// m1 leaves; m0 comes back and owns everything at once.
	if err := f.c.LeaveGroup(ctx, "t", "g", "m1"); err != nil {
		t.Fatal(err)
	}
	appendSome(3)
	a0, n0 = read("m0", "")
	if n0 != 30 {
		t.Fatalf("m0 after m1 left read %d rows, want 30", n0)
	}
	read("m0", a0)
	total := 0
	for _, ids := range sink {
		for range ids {
			total++
		}
	}
	if total != int(next) {
		t.Fatalf("the members read %d rows, %d were appended", total, next)
	}
	if _, _, err := f.c.GroupChanges(ctx, "t", "g", "bad/name", client.GroupOptions{}); err == nil {
		t.Fatal("a member named bad/name was taken")
	}
}

// A share handed back is one the group gave out: one through a version
// past the latest, of another group made under the name, or malformed is
// a 400 and records nothing; a group that cannot start where it is asked
// to is refused before it has any state.
func TestAGroupRefusesSharesItDidNotGive(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	if _, err := f.c.CreateTable(ctx, "t", rollouts.Schema); err != nil {
		t.Fatal(err)
	}
	rec := rollouts.Batch(testenv.Allocator(t), 42, 0, 0, 10)
	if _, err := f.c.Append(ctx, "t", rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if err := f.c.CheckpointLSM(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if code, body := raw(t, f, "GET", "/api/v1/tables/t/changes?group=g&member=m&from=99", "", "", ""); code != 404 {
		t.Fatalf("a group starting past the latest version: %d %s", code, body)
	}
	_, ack, err := f.c.GroupChanges(ctx, "t", "g", "m", client.GroupOptions{})
	if err != nil || ack == "" {
		t.Fatalf("first read: %q %v", ack, err)
	}
	parts := strings.Split(ack, ":")
	for _, bad := range []string{
		"1000:" + parts[1] + ":" + parts[2], // past the latest version
		parts[0] + ":" + parts[1] + ":another-group",
		parts[0] + ":" + parts[1],
		"0:" + parts[1] + ":" + parts[2],
	} {
		if code, body := raw(t, f, "GET", "/api/v1/tables/t/changes?group=g&member=m&ack="+url.QueryEscape(bad), "", "", ""); code != 400 {
			t.Errorf("ack=%s: %d %s", bad, code, body)
		}
	}
	// Nothing was recorded: the rows come again.
	recs, _, err := f.c.GroupChanges(ctx, "t", "g", "m", client.GroupOptions{})
	if err != nil || len(recs) == 0 {
		t.Fatalf("after the refused acks: %d batches, %v", len(recs), err)
	}
	for _, r := range recs {
		r.Release()
	}
	if _, _, err := f.c.GroupChanges(ctx, "t", "g", "m", client.GroupOptions{Ack: ack}); err != nil {
		t.Fatalf("the real ack: %v", err)
	}
	// Deleted, the group is made again from its start.
	if err := f.c.DeleteGroup(ctx, "t", "g"); err != nil {
		t.Fatal(err)
	}
	if err := f.c.DeleteGroup(ctx, "t", "g"); err == nil {
		t.Fatal("a group deleted twice")
	}
	if _, _, err := f.c.GroupChanges(ctx, "t", "g", "m", client.GroupOptions{Ack: ack}); err == nil {
		t.Fatal("an ack of the deleted group was taken by the one made again")
	}
}
