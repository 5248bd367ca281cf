package commit_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/changes"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

var rewardSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "reward", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

func rewardBatch(ids ...int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(testenv.Arrow, rewardSchema)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.Float64Builder).Append(float64(id) / 10)
	}
	return b.NewRecordBatch()
}

// An overwrite of rows replaces every row and keeps the schema, its
// changes are the rows it removed and added; no rows leave the table
// empty; rows that do not fit are refused before anything is written;
// named, it is sent again after another append without dropping that
// append's rows.
func TestAnOverwriteReplacesEveryRowOnce(t *testing.T) {
	b := open(t, "file://"+t.TempDir())
	if _, err := commit.Create(ctx, b, rewardSchema, nil, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ids := range [][]int64{{1, 2, 3}, {4, 5}} { // v2, v3
		rec := rewardBatch(ids...)
		if _, err := tb.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	over := rewardBatch(7, 8)
	defer over.Release()
	key := format.Idempotency{Producer: "nightly-2026-12-07"}
	res, err := tb.OverwriteRows(ctx, &key, over) // v4
	if err != nil || res.Version != 4 || res.Rows != 2 || res.Duplicate {
		t.Fatalf("overwrite: %+v %v", res, err)
	}
	if got := idsOf(t, b, 4); !slices.Equal(got, []int64{7, 8}) {
		t.Fatalf("v4 holds %v", got)
	}
	m4, err := table.ReadManifest(ctx, b, 4)
	if err != nil {
		t.Fatal(err)
	}
	if m4.Transaction.Kind != format.KindOverwrite || !m4.Schema().Equal(rewardSchema) || len(m4.Fragments) != 1 {
		t.Fatalf("v4: %s, schema %v, %d fragments", m4.Transaction.Kind, m4.Schema(), len(m4.Fragments))
	}
	if c := changed(t, b, 4); !slices.Equal(c[changes.ChangeDelete], []int64{1, 2, 3, 4, 5}) || !slices.Equal(c[changes.ChangeInsert], []int64{7, 8}) {
		t.Fatalf("the overwrite's changes: %v", c)
	}

	more := rewardBatch(9)
	defer more.Release()
	if _, err := tb.Append(ctx, more); err != nil { // v5
		t.Fatal(err)
	}
	again, err := commit.OpenTable(ctx, b, nil) // another process, say
	if err != nil {
		t.Fatal(err)
	}
	res, err = again.OverwriteRows(ctx, &key, over)
	if err != nil || !res.Duplicate || res.Version != 4 || res.Rows != 2 {
		t.Fatalf("the overwrite sent again: %+v %v", res, err)
	}
	if v, _ := table.LatestVersion(ctx, b); v != 5 || !slices.Equal(idsOf(t, b, 5), []int64{7, 8, 9}) {
		t.Fatalf("the overwrite sent again changed the table: v%d %v", v, idsOf(t, b, v))
	}

	wrong := idBatch(1) // no reward: nullable, fits
	defer wrong.Release()
	if _, err := tb.OverwriteRows(ctx, nil, wrong); err != nil { // v6
		t.Fatal(err)
	}
	bad := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "nope", Type: arrow.PrimitiveTypes.Int64}}, nil), wrong.Columns(), 1)
	defer bad.Release()
	if _, err := tb.OverwriteRows(ctx, nil, bad); !errors.Is(err, evolve.ErrBadInput) {
		t.Fatalf("an overwrite with a column the table lacks: %v", err)
	}
	if res, err := tb.OverwriteRows(ctx, nil); err != nil || res.Version != 7 { // v7: empty
		t.Fatalf("an overwrite with no rows: %+v %v", res, err)
	}
	if got := idsOf(t, b, 7); len(got) != 0 {
		t.Fatalf("v7 holds %v", got)
	}
}

// An overwrite planned before an alter lands after it under the new
// schema — the added column stays, its rows conformed to it — and an
// overwrite whose rows hold a column an alter dropped meanwhile is
// refused, with nothing committed, rather than stored without it.
func TestAnOverwriteAfterAnAlterPlansAgainUnderTheNewSchema(t *testing.T) {
	b := open(t, "file://"+t.TempDir())
	if _, err := commit.Create(ctx, b, rewardSchema, nil, nil); err != nil {
		t.Fatal(err)
	}
	stale, err := commit.OpenTable(ctx, b, nil) // at v1
	if err != nil {
		t.Fatal(err)
	}
	other, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Alter(ctx, evolve.ColumnChange{Op: evolve.AddColumn, Column: "grade", Type: arrow.BinaryTypes.String}); err != nil { // v2
		t.Fatal(err)
	}
	over := rewardBatch(1, 2)
	defer over.Release()
	res, err := stale.OverwriteRows(ctx, nil, over) // v3
	if err != nil || res.Version != 3 {
		t.Fatalf("overwrite after an alter: %+v %v", res, err)
	}
	m3, err := table.ReadManifest(ctx, b, 3)
	if err != nil {
		t.Fatal(err)
	}
	if m3.Schema().NumFields() != 3 || m3.Schema().Field(2).Name != "grade" || !slices.Equal(idsOf(t, b, 3), []int64{1, 2}) {
		t.Fatalf("v3: schema %v, rows %v: the overwrite undid the alter", m3.Schema(), idsOf(t, b, 3))
	}

	stale2, err := commit.OpenTable(ctx, b, nil) // at v3
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Alter(ctx, evolve.ColumnChange{Op: evolve.DropColumn, Column: "reward"}); err != nil { // v4
		t.Fatal(err)
	}
	if _, err := stale2.OverwriteRows(ctx, nil, over); !errors.Is(err, evolve.ErrBadInput) {
		t.Fatalf("an overwrite holding a dropped column's values: %v", err)
	}
	if v, _ := table.LatestVersion(ctx, b); v != 4 {
		t.Fatalf("a refused overwrite committed: latest v%d", v)
	}
}

// A version's commit time never goes back: a writer whose clock is behind
// the last commit's stamps its version with that commit's time, so that
// time travel by timestamp can search the versions by it.
func TestACommitTimeNeverGoesBack(t *testing.T) {
	b := open(t, "mem://")
	createIDTable(t, b)
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	ahead := time.Now().Add(time.Hour).UTC()
	m.Timestamp = ahead // as a writer whose clock is an hour ahead wrote it
	next, err := commit.Apply(m, &format.Transaction{Kind: format.KindAppend, CommitID: format.NewID()})
	if err != nil {
		t.Fatal(err)
	}
	if !next.Timestamp.Equal(ahead) {
		t.Fatalf("v%d after a version at %s: %s", next.Version, ahead, next.Timestamp)
	}
	// Another process, whose clock is behind the committer's, rebuilds a
	// version from its transaction (as it catches up after losing a race):
	// the version keeps its own time, and what it commits after it is not
	// earlier.
	m.Timestamp = time.Now().Add(-time.Minute).UTC()
	rec := next.Transaction
	rec.Committed = ahead // as a committer an hour ahead recorded it
	replayed, err := commit.Replay(m, &rec)
	if err != nil {
		t.Fatal(err)
	}
	if !replayed.Timestamp.Equal(ahead) {
		t.Fatalf("v%d replayed has the time %s, want its own %s", replayed.Version, replayed.Timestamp, ahead)
	}
	after, err := commit.Apply(replayed, &format.Transaction{Kind: format.KindAppend, CommitID: format.NewID()})
	if err != nil || after.Timestamp.Before(ahead) {
		t.Fatalf("v%d after a replayed version at %s: %s (%v)", after.Version, ahead, after.Timestamp, err)
	}
	m.Timestamp = time.Now().Add(-time.Hour).UTC()
	if next, err = commit.Apply(m, &format.Transaction{Kind: format.KindAppend, CommitID: format.NewID()}); err != nil || !next.Timestamp.After(m.Timestamp.Add(59*time.Minute)) {
		t.Fatalf("a version after one an hour old is stamped %s (%v)", next.Timestamp, err)
	}
}
