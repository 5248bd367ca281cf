package walshard_test

import (
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

// Promises of names across shards, pinned here: an append sent again to
// another shard (a retry that reached another server) is stored once
// whichever merge installs the copies — the shards' own merges in either
// order (TestARetryOnAnotherShardIsStoredOnce), one fleet merge of both
// (TestARetryOnAnotherShardIsStoredOnceByOneFleetMerge), or a direct
// append and a shard's merge (TestARetryThroughAShardOfADirectAppendIsStoredOnce).

// twoCopies appends, under one name, ids 1 and 2 through w1 and, among
// other rows, through w2; it flushes both.
func twoCopies(t *testing.T) (w1, w2 *walshard.Shard, bk blob.Bucket) {
	t.Helper()
	bk = newTable(t, "mem://")
	w1 = open(t, bk, "w1", walshard.Options{})
	w2 = open(t, bk, "w2", walshard.Options{})
	t.Cleanup(func() { w1.Close(); w2.Close() })
	mustKeyed(t, w1, "client", 1, 1, 2)
	appendIDs(t, w2, 9)
	if ack := mustKeyed(t, w2, "client", 1, 1, 2); ack.Duplicate {
		t.Fatalf("w2 knew w1's name: %+v", ack)
	}
	mustKeyed(t, w2, "client", 2, 3)
	for _, s := range []*walshard.Shard{w1, w2} {
		if _, err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return w1, w2, bk
}

func storedOnce(t *testing.T, got map[int64]int) {
	t.Helper()
	if len(got) != 4 || got[1] != 1 || got[2] != 1 || got[3] != 1 || got[9] != 1 {
		t.Fatalf("table holds %v, want ids 1, 2, 3 and 9 once each", got)
	}
}

func TestARetryOnAnotherShardIsStoredOnce(t *testing.T) {
	for _, order := range []string{"first shard first", "second shard first"} {
		t.Run(order, func(t *testing.T) {
			w1, w2, b := twoCopies(t)
			shards := []*walshard.Shard{w1, w2}
			if order == "second shard first" {
				shards = []*walshard.Shard{w2, w1}
			}
			for _, s := range shards {
				if _, err := s.Merge(ctx); err != nil {
					t.Fatal(err)
				}
			}
			storedOnce(t, baseIDs(t, b))
		})
	}
}

func TestARetryOnAnotherShardIsStoredOnceByOneFleetMerge(t *testing.T) {
	_, _, b := twoCopies(t)
	res, err := walshard.FleetMerge(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Shards != 2 {
		t.Fatalf("fleet merge: %+v, want both shards", res)
	}
	storedOnce(t, baseIDs(t, b))
}

func TestARetryThroughAShardOfADirectAppendIsStoredOnce(t *testing.T) {
	b := newTable(t, "mem://")
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := batch("w1", 1, 2)
	defer rec.Release()
	if _, err := tb.AppendOnce(ctx, table.Idempotency{Producer: "client", Seq: 1}, rec); err != nil {
		t.Fatal(err)
	}
	s := open(t, b, "w1", walshard.Options{})
	defer s.Close()
	mustKeyed(t, s, "client", 1, 1, 2)
	mustKeyed(t, s, "client", 2, 3)
	appendIDs(t, s, 9)
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	storedOnce(t, baseIDs(t, b))
	// The merge recorded the names it installed: a direct append sent
	// again under one of them stores nothing.
	rec3 := batch("w1", 3)
	defer rec3.Release()
	res, err := tb.AppendOnce(ctx, table.Idempotency{Producer: "client", Seq: 2}, rec3)
	if err != nil || !res.Duplicate {
		t.Fatalf("direct append of a name a merge installed: %+v, %v; want a duplicate", res, err)
	}
	storedOnce(t, baseIDs(t, b))
}
