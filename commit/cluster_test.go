package commit_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
)

// beforeCommit runs hook once, before the first manifest create.
type beforeCommit struct {
	blob.Bucket
	once sync.Once
	hook func()
}

func (o *beforeCommit) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if strings.HasPrefix(key, format.VersionsDir) {
		o.once.Do(o.hook)
	}
	return o.Bucket.PutIfAbsent(ctx, key, data)
}

// A cluster key and a key index never hold together, whichever commits
// first: the one overtaken is refused as it is when planned after the
// other (a bad schema change; bad columns).
func TestAClusterKeyAndAnIndexRacingNeverBothLand(t *testing.T) {
	setKey := evolve.ColumnChange{Op: evolve.ClusterBy, Columns: []string{"reward"}}
	for _, first := range []string{"index", "key"} {
		t.Run(first+" first", func(t *testing.T) {
			b, other := alterTable(t, evSchema)
			appendJSON(t, other, evSchema, `[{"id":1,"reward":0.5}]`)
			racer := &beforeCommit{Bucket: b, hook: func() {
				var err error
				if first == "index" {
					_, err = other.CreateIndex(ctx, "id")
				} else {
					_, err = other.Alter(ctx, setKey)
				}
				if err != nil {
					t.Error(err)
				}
			}}
			tb, err := commit.OpenTable(ctx, racer, nil)
			if err != nil {
				t.Fatal(err)
			}
			var want error
			if first == "index" {
				_, err = tb.Alter(ctx, setKey)
				want = evolve.ErrBadSchemaChange
			} else {
				_, err = tb.CreateIndex(ctx, "id")
				want = commit.ErrClusteredIndex
			}
			if !errors.Is(err, commit.ErrClusteredIndex) || !errors.Is(err, want) {
				t.Fatalf("overtaken: %v; want ErrClusteredIndex and %v", err, want)
			}
			m, err := table.ReadLatest(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.ClusterBy) > 0 && len(m.Indexes) > 0 {
				t.Fatalf("the table holds a cluster key %v and an index", m.ClusterBy)
			}
		})
	}
}

// An index build whose commit loses to a delete builds again, and the
// object the lost plan wrote goes at once: one index object is left, the
// one the table names.
func TestAnIndexBuildThatLostLeavesNoObject(t *testing.T) {
	b, other := alterTable(t, evSchema)
	appendJSON(t, other, evSchema, `[{"id":1,"reward":0.5},{"id":2,"reward":0.7}]`)
	racer := &beforeCommit{Bucket: b, hook: func() {
		if _, n, err := other.Delete(ctx, expr.Eq("id", value.Int(1))); err != nil || n != 1 {
			t.Errorf("delete: %d, %v", n, err)
		}
	}}
	tb, err := commit.OpenTable(ctx, racer, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.CreateIndex(ctx, "id"); err != nil {
		t.Fatal(err)
	}
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for o, err := range blob.List(ctx, b, format.IndicesDir, 100) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, o.Key)
	}
	if ix := m.IndexOn("id"); ix == nil || len(keys) != 1 || keys[0] != ix.Key || ix.Rows != 1 {
		t.Fatalf("index objects %v; the table's index %+v", keys, ix)
	}
}
