package commit

import (
	"testing"

	"github.com/stratadb/strata/table"
)

func TestConflictMatrixCellByCell(t *testing.T) {
	app := table.Transaction{Kind: table.KindAppend}
	mergeA := table.Transaction{Kind: table.KindMerge, Shard: "a", Watermark: 5}
	mergeA3 := table.Transaction{Kind: table.KindMerge, Shard: "a", Watermark: 3}
	mergeA9 := table.Transaction{Kind: table.KindMerge, Shard: "a", Watermark: 9}
	mergeB := table.Transaction{Kind: table.KindMerge, Shard: "b", Watermark: 5}
	del1 := table.Transaction{Kind: table.KindDelete, Deletions: []table.FragmentDeletion{{FragmentID: 1}}}
	del2 := table.Transaction{Kind: table.KindDelete, Deletions: []table.FragmentDeletion{{FragmentID: 2}}}
	rw1 := table.Transaction{Kind: table.KindRewrite, Removed: []uint64{1, 7}}
	rw2 := table.Transaction{Kind: table.KindRewrite, Removed: []uint64{2, 8}}
	ow := table.Transaction{Kind: table.KindOverwrite}
	ix := table.Transaction{Kind: table.KindCreateIndex}
	cases := []struct {
		name         string
		ours, theirs table.Transaction
		want         Decision
	}{
		{"append after append", app, app, Compatible},
		{"append after a merge", app, mergeA, Compatible},
		{"append after a delete", app, del1, Compatible},
		{"append after a rewrite: appends never conflict with compaction", app, rw1, Compatible},
		{"append after an overwrite", app, ow, Conflict},

		{"merge after an append", mergeA, app, Compatible},
		{"merge after another shard's merge", mergeA, mergeB, Compatible},
		{"merge after the same shard's merge that covers it is done", mergeA, mergeA9, Done},
		{"merge after the same shard's merge to the same watermark is done", mergeA, mergeA, Done},
		{"merge after the same shard's lower merge retries", mergeA, mergeA3, Retry},
		{"merge after a delete", mergeA, del1, Compatible},
		{"merge after a rewrite", mergeA, rw1, Compatible},
		{"merge after an overwrite", mergeA, ow, Conflict},

		{"delete after an append", del1, app, Compatible},
		{"delete after a merge", del1, mergeA, Compatible},
		{"delete after a delete of other fragments", del1, del2, Compatible},
		{"delete after a delete of the same fragment retries", del1, del1, Retry},
		{"delete after a rewrite of other fragments", del1, rw2, Compatible},
		{"delete after a rewrite of its fragment retries", del1, rw1, Retry},
		{"delete after an overwrite", del1, ow, Conflict},

		{"rewrite after an append", rw1, app, Compatible},
		{"rewrite after a merge", rw1, mergeA, Compatible},
		{"rewrite after a delete elsewhere", rw1, del2, Compatible},
		{"rewrite after a delete of a source re-plans", rw1, del1, Retry},
		{"rewrite after a disjoint rewrite", rw1, rw2, Compatible},
		{"two rewrites over a common fragment: the second re-plans", rw1, rw1, Retry},
		{"rewrite after an overwrite", rw1, ow, Conflict},

		{"overwrite after an append", ow, app, Compatible},
		{"overwrite after a merge", ow, mergeA, Compatible},
		{"overwrite after a delete", ow, del1, Compatible},
		{"overwrite after a rewrite", ow, rw1, Compatible},
		{"overwrite after an overwrite retries", ow, ow, Retry},

		{"an index build after an append", ix, app, Compatible},
		{"an index build after a merge", ix, mergeA, Compatible},
		{"an index build after a delete re-plans", ix, del1, Retry},
		{"an index build after a rewrite re-plans", ix, rw1, Retry},
		{"a rewrite after an index build re-plans to record its remap", rw1, ix, Retry},
		{"an append after an index build", app, ix, Compatible},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Check(&c.ours, &c.theirs); got != c.want {
				t.Fatalf("Check(%s, %s) = %v, want %v", c.ours.Kind, c.theirs.Kind, got, c.want)
			}
		})
	}
}
