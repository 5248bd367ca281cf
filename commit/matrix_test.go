package commit

import (
	"testing"

	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

func TestConflictMatrixCellByCell(t *testing.T) {
	app := format.Transaction{Kind: format.KindAppend}
	mergeA := format.Transaction{Kind: format.KindMerge, Shard: "a", Watermark: 5}
	mergeA3 := format.Transaction{Kind: format.KindMerge, Shard: "a", Watermark: 3}
	mergeA9 := format.Transaction{Kind: format.KindMerge, Shard: "a", Watermark: 9}
	mergeB := format.Transaction{Kind: format.KindMerge, Shard: "b", Watermark: 5}
	del1 := format.Transaction{Kind: format.KindDelete, Deletions: []format.FragmentDeletion{{FragmentID: 1}}}
	del2 := format.Transaction{Kind: format.KindDelete, Deletions: []format.FragmentDeletion{{FragmentID: 2}}}
	rw1 := format.Transaction{Kind: format.KindRewrite, Removed: []uint64{1, 7}}
	rw2 := format.Transaction{Kind: format.KindRewrite, Removed: []uint64{2, 8}}
	ow := format.Transaction{Kind: format.KindOverwrite}
	restore := format.Transaction{Kind: format.KindOverwrite, Restores: 3}
	ix := format.Transaction{Kind: format.KindCreateIndex}
	// Upserts of ids 10..20 (deleting from fragment 1) and 30..40; rows
	// added with ids 15..25, 50..60, and with no statistics.
	ids := func(lo, hi int64) []format.Fragment {
		return []format.Fragment{{Columns: []format.ColumnStats{{Name: "id", Min: ptr(value.Int(lo)), Max: ptr(value.Int(hi))}}}}
	}
	up1 := format.Transaction{Kind: format.KindUpsert, Keys: []string{"id"}, Added: ids(10, 20), Deletions: []format.FragmentDeletion{{FragmentID: 1}}}
	up2 := format.Transaction{Kind: format.KindUpsert, Keys: []string{"id"}, Added: ids(30, 40)}
	sync := format.Transaction{Kind: format.KindUpsert, Keys: []string{"id"}, Added: ids(10, 20), DeletesUnmatched: true}
	appMeets := format.Transaction{Kind: format.KindAppend, Added: ids(15, 25)}
	appMisses := format.Transaction{Kind: format.KindAppend, Added: ids(50, 60)}
	appUnknown := format.Transaction{Kind: format.KindAppend, Added: []format.Fragment{{}}}
	mergeMeets := format.Transaction{Kind: format.KindMerge, Shard: "a", Watermark: 5, Added: ids(20, 20)}
	upd1 := format.Transaction{Kind: format.KindUpdate, Added: ids(10, 12), Deletions: []format.FragmentDeletion{{FragmentID: 1}}}
	upd2 := format.Transaction{Kind: format.KindUpdate, Added: ids(50, 52), Deletions: []format.FragmentDeletion{{FragmentID: 2}}}
	// Keyed merges: shard a's upserts of ids 10..20 (deleting from
	// fragment 1), shard b's of ids 15..20.
	kmA := format.Transaction{Kind: format.KindMerge, Shard: "a", Watermark: 5, Keys: []string{"id"}, Added: ids(10, 20), Deletions: []format.FragmentDeletion{{FragmentID: 1}}}
	kmB := format.Transaction{Kind: format.KindMerge, Shard: "b", Watermark: 2, Keys: []string{"id"}, Added: ids(15, 20)}
	alter := format.Transaction{Kind: format.KindAlter}
	alterDrop := format.Transaction{Kind: format.KindAlter, Dropped: []string{"note"}}
	appNote := format.Transaction{Kind: format.KindAppend, Added: []format.Fragment{{Rows: 3, Columns: []format.ColumnStats{{Name: "note", Nulls: 1}}}}}
	appNoteNull := format.Transaction{Kind: format.KindAppend, Added: []format.Fragment{{Rows: 3, Columns: []format.ColumnStats{{Name: "note", Nulls: 3}}}}}
	cases := []struct {
		name         string
		ours, theirs format.Transaction
		want         Decision
	}{
		{"append after append", app, app, Compatible},
		{"append after a merge", app, mergeA, Compatible},
		{"append after a delete", app, del1, Compatible},
		{"append after a rewrite: appends never conflict with compaction", app, rw1, Compatible},
		{"append after an overwrite", app, ow, Conflict},

		// An alter (a schema change) landed first.
		{"append after an alter goes on: its fragment is read by stored name", app, alter, Compatible},
		{"append holding values in a column the alter dropped conflicts", appNote, alterDrop, Conflict},
		{"append holding only nulls in a column the alter dropped goes on", appNoteNull, alterDrop, Compatible},
		{"merge after an alter goes on, even of a dropped column", mergeA, alterDrop, Compatible},
		{"delete after an alter", del1, alter, Compatible},
		{"rewrite after an alter: compaction goes on", rw1, alter, Compatible},
		{"an overwrite of rows after an alter plans again", ow, alter, Retry},
		{"a restore after an alter goes on", restore, alter, Compatible},
		{"upsert after an alter plans again", up1, alter, Retry},
		{"a merge deleting the rows its source lacks, after an append of other keys", sync, appMisses, Retry},
		{"a merge deleting the rows its source lacks, after a merge of a shard", sync, mergeMeets, Retry},
		{"a merge deleting the rows its source lacks, after a compaction", sync, rw1, Compatible},
		{"update after an alter plans again", upd1, alter, Retry},
		{"index after an alter plans again", ix, alter, Retry},
		{"alter after an alter plans again", alter, alterDrop, Retry},
		// An alter planned before another commit landed.
		{"alter after an append", alter, app, Compatible},
		{"alter after a merge", alter, mergeA, Compatible},
		{"alter after a delete", alter, del1, Compatible},
		{"alter after a rewrite", alter, rw1, Compatible},
		{"alter after an upsert", alter, up1, Compatible},
		{"alter after an update", alter, upd1, Compatible},
		{"alter after an index", alter, ix, Compatible},
		{"alter after an overwrite", alter, ow, Conflict},

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

		{"an upsert after an append whose rows may hold its keys re-plans", up1, appMeets, Retry},
		{"an upsert after an append of other keys", up1, appMisses, Compatible},
		{"an upsert after an append without statistics re-plans", up1, appUnknown, Retry},
		{"an upsert after a merge whose rows may hold its keys re-plans", up1, mergeMeets, Retry},
		{"an upsert after a merge of other keys", up2, mergeMeets, Compatible},
		{"an upsert after an upsert of the same keys re-plans", up1, up1, Retry},
		{"an upsert after an upsert of other keys", up1, up2, Compatible},
		{"an upsert after a delete of a fragment it deletes from re-plans", up1, del1, Retry},
		{"an upsert after a delete elsewhere", up1, del2, Compatible},
		{"an upsert after a rewrite of a fragment it deletes from re-plans", up1, rw1, Retry},
		{"an upsert after a rewrite elsewhere", up1, rw2, Compatible},
		{"an upsert after an index build", up1, ix, Compatible},
		{"an upsert after an overwrite", up1, ow, Conflict},
		{"append after an upsert: appends never wait for upserts", app, up1, Compatible},
		{"merge after an upsert", mergeA, up1, Compatible},
		{"delete after an upsert that deleted from its fragment re-plans", del1, up1, Retry},
		{"delete after an upsert elsewhere", del2, up1, Compatible},
		{"rewrite after an upsert that deleted from a source re-plans", rw1, up1, Retry},
		{"rewrite after an upsert elsewhere: compaction goes on", rw2, up1, Compatible},
		{"an index build after an upsert re-plans", ix, up2, Retry},
		{"overwrite after an upsert", ow, up1, Compatible},

		{"an update after an append: rows appended meanwhile are not updated", upd1, app, Compatible},
		{"an update after a merge", upd1, mergeA, Compatible},
		{"an update after a delete of a fragment it changes re-plans", upd1, del1, Retry},
		{"an update after a delete elsewhere", upd1, del2, Compatible},
		{"an update after a rewrite of a fragment it changes re-plans", upd1, rw1, Retry},
		{"an update after a rewrite elsewhere", upd1, rw2, Compatible},
		{"an update after an upsert that changed its fragment re-plans", upd1, up1, Retry},
		{"an update after an update of the same fragment re-plans", upd1, upd1, Retry},
		{"an update after an update elsewhere", upd1, upd2, Compatible},
		{"an update after an overwrite", upd1, ow, Conflict},
		{"append after an update", app, upd1, Compatible},
		{"delete after an update of its fragment re-plans", del1, upd1, Retry},
		{"rewrite after an update of a source re-plans", rw1, upd1, Retry},
		{"rewrite after an update elsewhere: compaction goes on", rw2, upd1, Compatible},
		{"an upsert after an update whose rows may hold its keys re-plans", up2, format.Transaction{Kind: format.KindUpdate, Added: ids(35, 35)}, Retry},
		{"an upsert after an update of other keys", up2, upd2, Compatible},
		{"an index build after an update re-plans", ix, upd1, Retry},

		// A merge of a shard's upserts (keyed): a merge of its shard and
		// an upsert at once.
		{"a keyed merge after a merge covering it is done", kmA, mergeA9, Done},
		{"a keyed merge after its shard's merge below it re-plans", kmA, mergeA3, Retry},
		{"a keyed merge after another shard's merge of other keys", kmA, mergeB, Compatible},
		{"a keyed merge after another shard's merge that may hold its keys re-plans", kmA, format.Transaction{Kind: format.KindMerge, Shard: "b", Watermark: 5, Added: ids(12, 12)}, Retry},
		{"a keyed merge after an append that may hold its keys re-plans", kmA, appMeets, Retry},
		{"a keyed merge after an append of other keys", kmA, appMisses, Compatible},
		{"a keyed merge after a direct upsert that may hold its keys re-plans", kmA, format.Transaction{Kind: format.KindUpsert, Keys: []string{"id"}, Added: ids(18, 30)}, Retry},
		{"a keyed merge after a delete of a fragment it deletes from re-plans", kmA, del1, Retry},
		{"a keyed merge after a delete elsewhere", kmA, del2, Compatible},
		{"a keyed merge after a compaction of a fragment it deletes from re-plans", kmA, rw1, Retry},
		{"a keyed merge after a compaction elsewhere", kmA, rw2, Compatible},
		{"a keyed merge after an alter re-plans (its keys name columns)", kmA, alter, Retry},
		{"a keyed merge after an overwrite", kmA, ow, Conflict},
		{"a keyed merge after a keyed merge of the same keys re-plans", kmA, kmB, Retry},
		{"an upsert after a keyed merge that may hold its keys re-plans", up1, kmB, Retry},
		{"an upsert after a keyed merge of other keys", up2, kmB, Compatible},
		{"append after a keyed merge", app, kmA, Compatible},
		{"a merge after another shard's keyed merge", mergeB, kmA, Compatible},
		{"a merge of the same shard after a keyed merge covering it is done", mergeA3, kmA, Done},
		{"delete after a keyed merge that deleted from its fragment re-plans", del1, kmA, Retry},
		{"delete after a keyed merge elsewhere", del2, kmA, Compatible},
		{"compaction after a keyed merge that deleted from a source re-plans", rw1, kmA, Retry},
		{"compaction after a keyed merge elsewhere goes on", rw2, kmA, Compatible},
		{"an update after a keyed merge of its fragment re-plans", upd1, kmA, Retry},
		{"an index build after a keyed merge that deleted rows re-plans", ix, kmA, Retry},
		{"an index build after a keyed merge that deleted nothing", ix, format.Transaction{Kind: format.KindMerge, Shard: "a", Watermark: 5, Keys: []string{"id"}, Added: ids(10, 20)}, Compatible},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Check(&c.ours, &c.theirs); got != c.want {
				t.Fatalf("Check(%s, %s) = %v, want %v", c.ours.Kind, c.theirs.Kind, got, c.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
