package commit_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/value"
)

// An undo gives rows back: a delete taken back (as a repair takes back
// one never acknowledged) lands while an upsert of the key it had deleted,
// or a delete of rows it had deleted, is planned. The upsert leaves one
// row of its key, not the row given back beside its own; the delete
// deletes the row given back, which matches it. With a key index and
// without.
//
// Compacted between the delete and its undo, the fragment is gone: the
// undo gives the row back in a copy of it, a fragment of its own, and is
// seen all the same.
func TestAnUndoLandingBeforeAnUpsertOrADeleteIsSeen(t *testing.T) {
	for _, verb := range []string{"upsert", "delete"} {
		for _, variant := range []string{"plain", "indexed", "compacted"} {
			indexed := variant == "indexed"
			b, tb := alterTable(t, evSchema)
			// The delete's other match (id 2) lies in another fragment
			// than the row given back: it touches no fragment the undo
			// does.
			appendJSON(t, tb, evSchema, `[{"id":1,"reward":0.5},{"id":3,"reward":0.1}]`)
			appendJSON(t, tb, evSchema, `[{"id":2,"reward":0.7}]`)
			if indexed {
				if _, err := tb.CreateIndex(ctx, "id"); err != nil {
					t.Fatal(err)
				}
			}
			del, n, err := tb.Delete(ctx, expr.Eq("id", value.Int(1)))
			if err != nil || n != 1 {
				t.Fatalf("delete: %d, %v", n, err)
			}
			if variant == "compacted" {
				if _, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil); err != nil {
					t.Fatal(err)
				}
			}
			racer := &beforeCommit{Bucket: b, hook: func() {
				if err := commit.Undo(ctx, b, del.Manifest, nil); err != nil {
					t.Error(err)
				}
			}}
			other, err := commit.OpenTable(ctx, racer, nil)
			if err != nil {
				t.Fatal(err)
			}
			if verb == "upsert" {
				rec := jsonBatch(t, evSchema, `[{"id":1,"reward":0.9}]`)
				_, err = other.Upsert(ctx, []string{"id"}, rec)
				rec.Release()
			} else {
				_, _, err = other.Delete(ctx, expr.Gt("reward", value.Float(0.4)))
			}
			if err != nil {
				t.Fatalf("%s: %v", verb, err)
			}
			s, err := table.Open(ctx, b, nil)
			if err != nil {
				t.Fatal(err)
			}
			var rewards []float32
			for rec, err := range s.Scan(ctx, table.ScanOptions{Filter: expr.Eq("id", value.Int(1)), Columns: []string{"reward"}}) {
				if err != nil {
					t.Fatal(err)
				}
				for i := range int(rec.NumRows()) {
					rewards = append(rewards, float32Col(rec, 0, i))
				}
			}
			want := map[string][]float32{"upsert": {0.9}, "delete": nil}[verb]
			if len(rewards) != len(want) || len(want) == 1 && rewards[0] != want[0] {
				t.Fatalf("%s (%s) with an undo landing first: id 1 holds %v, want %v", verb, variant, rewards, want)
			}
		}
	}
}

func float32Col(rec arrow.RecordBatch, col, i int) float32 {
	return rec.Column(col).(*array.Float32).Value(i)
}
