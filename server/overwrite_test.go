package server_test

import (
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/server"
)

// An overwrite over HTTP replaces every row, the rows the server's shard
// acknowledged before it included, keeping the schema; the Go client's
// with no rows empties the table; one sent again under its name after
// another append overwrites nothing; rows that do not fit are a 400 with
// nothing changed.
func TestAnOverwriteOverHTTP(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	first := eventBatch(1, 2, 3)
	defer first.Release()
	if _, err := f.c.CreateTable(ctx, "t", events, first); err != nil {
		t.Fatal(err)
	}
	shard := eventBatch(4)
	defer shard.Release()
	if _, err := f.c.Append(ctx, "t", shard); err != nil { // in the server's shard
		t.Fatal(err)
	}
	scan := func() map[int64]int { return freshIDs(t, f.c, "t") }
	over := eventBatch(7, 8)
	defer over.Release()
	res, err := f.c.Overwrite(ctx, "t", over)
	if err != nil || res.Rows != 2 || res.Duplicate {
		t.Fatalf("overwrite: %+v %v", res, err)
	}
	if got := scan(); !maps.Equal(got, map[int64]int{7: 1, 8: 1}) {
		t.Fatalf("after the overwrite: %v, want 7 and 8 (the shard's row 4 replaced too)", got)
	}

	post := func(body, key string) (*http.Response, string) {
		h := http.Header{"Content-Type": {"application/x-ndjson"}}
		if key != "" {
			h.Set(api.HeaderIdempotencyKey, key)
		}
		return send(t, f, "POST", "/api/v1/tables/t/rows?mode=overwrite", h, body)
	}
	body := `{"id": 10, "msg": "a"}` + "\n" + `{"id": 11, "msg": "b"}` + "\n"
	if resp, out := post(body, "nightly-1"); resp.StatusCode != http.StatusOK || !strings.Contains(out, `"rows":2`) {
		t.Fatalf("named overwrite: %d %s", resp.StatusCode, out)
	}
	late := eventBatch(12)
	defer late.Release()
	if _, err := f.c.Append(ctx, "t", late); err != nil {
		t.Fatal(err)
	}
	resp, out := post(body, "nightly-1")
	if resp.StatusCode != http.StatusOK || resp.Header.Get(api.HeaderReplayed) != "true" || !strings.Contains(out, `"duplicate":true`) {
		t.Fatalf("the named overwrite sent again: %d %s", resp.StatusCode, out)
	}
	if got := scan(); !maps.Equal(got, map[int64]int{10: 1, 11: 1, 12: 1}) {
		t.Fatalf("after the overwrite sent again: %v, want 10, 11 and the later 12", got)
	}
	v, err := f.c.Describe(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"id": 1, "nope": 2}`, `{"id": "one", "msg": "a"}`, `{"msg": "no id"}`} {
		if resp, out := post(bad+"\n", ""); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("overwrite with %s: %d %s, want 400", bad, resp.StatusCode, out)
		}
	}
	if after, err := f.c.Describe(ctx, "t"); err != nil || after.Version != v.Version {
		t.Fatalf("refused overwrites committed: v%d, then %+v %v", v.Version, after, err)
	}
	if res, err := f.c.Overwrite(ctx, "t"); err != nil || res.Rows != 0 {
		t.Fatalf("an overwrite with no rows: %+v %v", res, err)
	}
	if got := scan(); len(got) != 0 {
		t.Fatalf("after an overwrite with no rows: %v", got)
	}
}

// A read as of a time (as_of=, the Go client's AsOf) sees the newest
// version committed at or before it, a count too, and a restore as of a
// time commits that version's rows; a time before the first version is a
// 404 naming it, a bad time or one with version= a 400.
func TestReadsAndARestoreAsOfATime(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	first := eventBatch(1, 2, 3)
	defer first.Release()
	before := time.Now()
	time.Sleep(2 * time.Millisecond)
	if _, err := f.c.CreateTable(ctx, "t", events, first); err != nil { // v1
		t.Fatal(err)
	}
	var at []time.Time // just after v1, v2, v3
	for i, ids := range [][]int64{nil, {7}, {8, 9}} {
		if i > 0 {
			rec := eventBatch(ids...)
			if _, err := f.c.Overwrite(ctx, "t", rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
		time.Sleep(2 * time.Millisecond)
		at = append(at, time.Now())
		time.Sleep(2 * time.Millisecond)
	}
	wants := []map[int64]int{{1: 1, 2: 1, 3: 1}, {7: 1}, {8: 1, 9: 1}}
	for i, want := range wants {
		recs, err := f.c.Scan(ctx, "t", client.ScanOptions{AsOf: at[i]})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(t, recs); !maps.Equal(got, want) {
			t.Errorf("as of just after v%d: %v, want %v", i+1, got, want)
		}
		if n, err := f.c.Count(ctx, "t", client.ScanOptions{AsOf: at[i]}); err != nil || n.Rows != int64(len(want)) {
			t.Errorf("count as of just after v%d: %+v %v", i+1, n, err)
		}
	}
	// Changes bounded by times: after the version as of just after v1,
	// through the one as of just after v2 (v2's overwrite: three rows
	// deleted, one inserted); from a time before the table was made, every
	// change since its creation.
	recs, through, err := f.c.Changes(ctx, "t", client.ChangesOptions{FromAsOf: at[0], ToAsOf: at[1]})
	if err != nil || through != 2 || rowsIn(recs) != 4 {
		t.Fatalf("changes from as of v1 to as of v2: %d rows through v%d, %v; want 4 through v2", rowsIn(recs), through, err)
	}
	release(recs)
	recs, through, err = f.c.Changes(ctx, "t", client.ChangesOptions{FromAsOf: before})
	if err != nil || through != 3 || rowsIn(recs) != 3+4+3 {
		t.Fatalf("changes from a time before the table: %d rows through v%d, %v; want 10 through v3", rowsIn(recs), through, err)
	}
	release(recs)
	for _, q := range []string{"from_as_of=2h&from=1", "from_as_of=noon", "from=0&to_as_of=2h&to=1", "from=0&to_as_of=noon"} {
		if code, out := raw(t, f, "GET", "/api/v1/tables/t/changes?"+q, "", "", ""); code != http.StatusBadRequest {
			t.Errorf("GET changes?%s: %d %s, want 400", q, code, out)
		}
	}
	res, err := f.c.RestoreAsOf(ctx, "t", at[0])
	if err != nil || res.Restored != 1 || res.Version != 4 || res.Rows != 3 {
		t.Fatalf("restore as of just after v1: %+v %v", res, err)
	}
	_, err = f.c.Scan(ctx, "t", client.ScanOptions{AsOf: before})
	if !client.IsCode(err, api.CodeNotFound) || !strings.Contains(err.Error(), "the oldest retained, v1") {
		t.Fatalf("a read as of a time before v1: %v", err)
	}
	for _, q := range []string{"as_of=yesterday", "as_of=2h&version=1", "as_of=2h&fresh=true"} {
		if code, out := raw(t, f, "GET", "/api/v1/tables/t/rows?"+q, "", "", ""); code != http.StatusBadRequest {
			t.Errorf("GET rows?%s: %d %s, want 400", q, code, out)
		}
	}
	if code, out := raw(t, f, "POST", "/api/v1/tables/t/restore", "application/json", `{"as_of": "2h", "version": 1}`, ""); code != http.StatusBadRequest {
		t.Errorf("a restore with as_of and version: %d %s", code, out)
	}
}

// An upsert with clauses over HTTP (when_… parameters, the Go client's
// UpsertWith) inserts only new keys, updates only present ones (where a
// condition over the pair holds), and deletes the rows its body lacks;
// clauses that do not parse, or with through=shard, are a 400.
func TestAnUpsertWithClausesOverHTTP(t *testing.T) {
	f := start(t, "file://"+t.TempDir(), server.Options{})
	first := eventBatch(1, 2, 3)
	defer first.Release()
	if _, err := f.c.CreateTable(ctx, "t", events, first); err != nil {
		t.Fatal(err)
	}
	scan := func() map[int64]int { return freshIDs(t, f.c, "t") }
	rows := eventBatch(3, 4) // id 3's msg is "", as the table's
	defer rows.Release()
	res, err := f.c.UpsertWith(ctx, "t", []string{"id"}, client.UpsertClauses{IgnoreMatched: true}, rows)
	if err != nil || res.Inserted != 1 || res.Updated != 0 {
		t.Fatalf("insert only: %+v %v", res, err)
	}
	res, err = f.c.UpsertWith(ctx, "t", []string{"id"}, client.UpsertClauses{IgnoreNew: true, MatchedIf: "target.id >= 4"}, rows)
	if err != nil || res.Inserted != 0 || res.Updated != 1 || res.Replaced != 1 {
		t.Fatalf("update only where target.id >= 4: %+v %v", res, err)
	}
	if got := scan(); !maps.Equal(got, map[int64]int{1: 1, 2: 1, 3: 1, 4: 1}) {
		t.Fatalf("after inserting and updating: %v", got)
	}
	res, err = f.c.UpsertWith(ctx, "t", []string{"id"}, client.UpsertClauses{DeleteMissing: true, MissingIf: "id > 1"}, rows)
	if err != nil || res.Deleted != 1 || res.Updated != 2 {
		t.Fatalf("a sync deleting the rows above 1 the body lacks: %+v %v", res, err)
	}
	if got := scan(); !maps.Equal(got, map[int64]int{1: 1, 3: 1, 4: 1}) {
		t.Fatalf("after the sync: %v", got)
	}
	for q, want := range map[string]string{
		"when_matched=maybe":                              `when_matched=\"maybe\": want one of update, ignore`,
		"when_matched_if=target.nope%3C1":                 "nope",
		"when_matched=ignore&when_matched_if=id%3E1":      "not with when_matched=ignore",
		"when_not_matched_by_source_if=id%3E1":            "give when_not_matched_by_source=delete",
		"when_not_matched_by_source=delete&through=shard": "commits to the table",
		"when_matched=ignore&when_not_matched=ignore":     "an upsert needs a clause",
	} {
		code, out := raw(t, f, "POST", "/api/v1/tables/t/rows?mode=upsert&key=id&"+q, "application/x-ndjson", `{"id": 5, "msg": "m"}`+"\n", "")
		if code != http.StatusBadRequest || !strings.Contains(out, want) {
			t.Errorf("upsert with %s: %d %s, want 400 saying %s", q, code, out, want)
		}
	}
}

// rowsIn counts the rows of batches.
func rowsIn(recs []arrow.RecordBatch) int64 {
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	return n
}

func release(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}
