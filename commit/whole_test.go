package commit

import (
	"testing"

	"github.com/stratadb/strata/table/format"
)

// A merge of copies (Whole) applies only from the watermarks it was
// planned on: its one fragment holds several shards' rows, so where
// another merge took some of them it is a retryable conflict, never
// trimmed; applied, it records the state it drained (ShardMark.Seq).
func TestAWholeMergeAppliesAsPlannedOrNotAtAll(t *testing.T) {
	cur := &format.Manifest{Version: 7, NextFragmentID: 1, Shards: map[string]format.ShardMark{
		"a": {Watermark: 3, Epoch: 1, Seq: 4},
		"b": {Watermark: 9, Epoch: 2, Seq: 12},
	}}
	copyOf := format.Fragment{Key: format.GenerationKey("a", 5, 1, "c0py"), Rows: 40}
	whole := func(fromA, fromB uint64, epochB uint64) *format.Transaction {
		return &format.Transaction{Kind: format.KindMerge, Whole: true, Added: []format.Fragment{copyOf},
			Merges: []format.ShardMerge{{Shard: "a", From: fromA, Watermark: 5, Epoch: 1, Seq: 7}, {Shard: "b", From: fromB, Watermark: 11, Epoch: epochB}}}
	}
	next, err := Apply(cur, whole(3, 9, 2))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := next.Shards["a"], next.Shards["b"]; a != (format.ShardMark{Watermark: 5, Epoch: 1, Seq: 7}) || b != (format.ShardMark{Watermark: 11, Epoch: 2, Seq: 12}) {
		t.Fatalf("marks after the merge: %+v %+v", a, b)
	}
	if len(next.Fragments) != 1 || next.Fragments[0].Key != copyOf.Key {
		t.Fatalf("fragments after the merge: %+v", next.Fragments)
	}
	for _, c := range []struct {
		why string
		txn *format.Transaction
	}{
		{"another merge took b to 9 after this one was planned at 8", whole(3, 8, 2)},
		{"a newer owner merges b", whole(3, 9, 1)},
	} {
		if _, err := Apply(cur, c.txn); !IsRetryableConflict(err) {
			t.Errorf("%s: %v, want a retryable conflict", c.why, err)
		}
	}
	// Against a merge that landed meanwhile, it plans again; the same
	// merge, not Whole, would be trimmed on apply.
	theirs := &format.Transaction{Kind: format.KindMerge, Merges: []format.ShardMerge{{Shard: "b", Watermark: 10, Epoch: 2}}}
	if d := Check(whole(3, 9, 2), theirs); d != Retry {
		t.Fatalf("a Whole merge against another merge of its shard: %v, want Retry", d)
	}
	trimmable := whole(3, 9, 2)
	trimmable.Whole = false
	if d := Check(trimmable, theirs); d != Compatible {
		t.Fatalf("a fleet merge of generations against another merge of its shard: %v, want Compatible", d)
	}
}
