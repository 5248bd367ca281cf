package roundtrip_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	iceio "github.com/apache/iceberg-go/io"
	itable "github.com/apache/iceberg-go/table"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/cmd/strata/command"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/lakehouse"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/server"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/value"
	"github.com/stratadb/strata/walshard"
)

var ctx = context.Background()

// rows maps id to a canonical text of the row's values.
type rows map[int64]string

func canonical(t *testing.T, recs ...arrow.RecordBatch) rows {
	t.Helper()
	out := rows{}
	for _, rec := range recs {
		ids := rec.Column(0).(*array.Int64)
		for i := range int(rec.NumRows()) {
			vals := make([]any, rec.NumCols())
			for j := range int(rec.NumCols()) {
				vals[j] = rec.Column(j).GetOneForMarshal(i)
			}
			data, err := json.Marshal(vals)
			if err != nil {
				t.Fatal(err)
			}
			if _, dup := out[ids.Value(i)]; dup {
				t.Fatalf("id %d twice", ids.Value(i))
			}
			out[ids.Value(i)] = string(data)
		}
	}
	return out
}

func sameRows(t *testing.T, what string, want, got rows) {
	t.Helper()
	if len(want) != len(got) {
		var missing, extra []int64
		for id := range want {
			if _, ok := got[id]; !ok {
				missing = append(missing, id)
			}
		}
		for id := range got {
			if _, ok := want[id]; !ok {
				extra = append(extra, id)
			}
		}
		slices.Sort(missing)
		slices.Sort(extra)
		t.Fatalf("%s: %d rows, want %d; missing %v, not sent %v", what, len(got), len(want), missing, extra)
	}
	for id, w := range want {
		if g, ok := got[id]; !ok || g != w {
			t.Fatalf("%s: row %d\n got  %s\n want %s", what, id, g, w)
		}
	}
}

func collect(t *testing.T, seq func(func(arrow.RecordBatch, error) bool)) rows {
	t.Helper()
	var recs []arrow.RecordBatch
	for rec, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	return canonical(t, recs...)
}

// csvable: the columns CSV can carry as text both ways.
func csvable(s *arrow.Schema) bool {
	for _, f := range s.Fields() {
		switch f.Type.ID() {
		case arrow.BOOL, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32,
			arrow.UINT64, arrow.FLOAT32, arrow.FLOAT64, arrow.STRING, arrow.LARGE_STRING, arrow.DATE32:
		default:
			return false
		}
	}
	return true
}

func TestRandomSchemasRoundTripThroughEveryPath(t *testing.T) {
	seeds := 20
	if s := os.Getenv("ROUNDTRIP_SEEDS"); s != "" {
		seeds, _ = strconv.Atoi(s)
	}
	base := uint64(time.Now().UnixNano())
	if s := os.Getenv("ROUNDTRIP_SEED"); s != "" {
		base, _ = strconv.ParseUint(s, 10, 64)
		seeds = 1
	}
	for i := range seeds {
		seed := base + uint64(i)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Logf("seed %d (ROUNDTRIP_SEED=%d to replay)", seed, seed)
			roundTrip(t, seed)
		})
	}
}

func roundTrip(t *testing.T, seed uint64) {
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x5eed))}
	schema := g.schema()
	t.Logf("schema: %s", schema)
	root := t.TempDir()
	u := "file://" + root + "/t"
	b, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := commit.Create(ctx, b, schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(&server.Options{Bucket: "file://" + root, Instance: "rt"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer srv.Shutdown(ctx)
	c, err := client.New(hs.URL, nil)
	if err != nil {
		t.Fatal(err)
	}

	want := rows{}
	next := int64(0)
	batch := func(n int) arrow.RecordBatch {
		rec := g.batch(schema, next, n)
		next += int64(n)
		for id, row := range canonical(t, rec) {
			want[id] = row
		}
		return rec
	}
	// The library: a direct append.
	rec := batch(40)
	tb, err := commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Append(ctx, rec); err != nil {
		t.Fatalf("library append: %v", err)
	}
	rec.Release()
	// A shard of a worker.
	sh, err := walshard.Open(ctx, b, &walshard.Options{Shard: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	rec = batch(30)
	if err := sh.Append(ctx, rec); err != nil {
		t.Fatalf("shard append: %v", err)
	}
	rec.Release()
	sh.Close() // left in the WAL; the next owner replays it
	// The server: Arrow IPC and JSON lines.
	rec = batch(25)
	if _, err := c.Append(ctx, "t", rec); err != nil {
		t.Fatalf("server append (Arrow): %v", err)
	}
	rec.Release()
	rec = batch(25)
	var jl bytes.Buffer
	if err := array.RecordToJSON(rec, &jl); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if _, err := c.AppendJSONLines(ctx, "t", jl.Bytes()); err != nil {
		t.Fatalf("server append (JSON lines): %v", err)
	}
	// The CLI: Parquet, JSON lines and (when it can carry the columns) CSV
	// files, in one invocation.
	dir := t.TempDir()
	files := []string{writeParquet(t, dir, batch(20)), writeJSONL(t, dir, batch(20))}
	if csvable(schema) {
		files = append(files, writeCSV(t, dir, batch(20)))
	}
	var out, errOut bytes.Buffer
	if code := command.Run(append([]string{"append", u}, files...), &command.Env{Out: &out, Err: &errOut, Open: blob.Open}); code != 0 {
		t.Fatalf("strata append: %d %s", code, errOut.String())
	}
	// Every row, through a fresh read of the server before anything is
	// merged but its own, then merged.
	sh, err = walshard.Open(ctx, b, &walshard.Options{Shard: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	sh.Close()
	// A fresh read sees the server's own rows before they are merged.
	fresh, err := c.Scan(ctx, "t", client.ScanOptions{Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "fresh read", want, canonical(t, fresh...))
	for _, r := range fresh {
		r.Release()
	}
	if err := c.CheckpointLSM(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	// Deletes by a filter on the id.
	cut := int64(g.r.IntN(int(next)))
	tb, err = commit.OpenTable(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Delete(ctx, expr.Lt("id", value.Int(cut))); err != nil {
		t.Fatalf("delete: %v", err)
	}
	for id := range want {
		if id < cut {
			delete(want, id)
		}
	}
	read := func(what string) {
		snap, err := table.Open(ctx, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		sameRows(t, what+": library scan", want, collect(t, snap.Scan(ctx, table.ScanOptions{})))
		recs, err := c.Scan(ctx, "t", client.ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sameRows(t, what+": server scan (Arrow)", want, canonical(t, recs...))
		for _, r := range recs {
			r.Release()
		}
		sameRows(t, what+": server scan (JSON lines)", want, jsonLines(t, hs.URL, schema))
		// Take by key: a few ids, some deleted, one never written.
		keys := []int64{next + 5}
		for range 5 {
			keys = append(keys, g.r.Int64N(next))
		}
		anys := make([]any, len(keys))
		for i, k := range keys {
			anys[i] = k
		}
		took, err := c.Take(ctx, "t", api.TakeRequest{Keys: anys})
		if err != nil {
			t.Fatalf("%s: take: %v", what, err)
		}
		wantTook := rows{}
		for _, k := range keys {
			if r, ok := want[k]; ok {
				wantTook[k] = r
			}
		}
		sameRows(t, what+": take", wantTook, canonical(t, took...))
		for _, r := range took {
			r.Release()
		}
		var out, errOut bytes.Buffer
		if code := command.Run([]string{"scan", u, "--format", "table"}, &command.Env{Out: &out, Err: &errOut, Open: blob.Open}); code != 0 {
			t.Fatalf("%s: strata scan --format table: %s", what, errOut.String())
		}
		checkStats(t, snap)
		checkFilter(t, g, snap)
		checkIceberg(t, b, root+"/t", snap.Manifest().Schema(), want, what)
	}
	read("after the appends")
	if res, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil); err != nil || res.Version == 0 {
		t.Fatalf("compact: %+v %v", res, err)
	}
	read("after a compaction")
}

// checkIceberg exports the table's Iceberg view and reads its current
// snapshot with iceberg-go's scan: the same rows and values as Strata's,
// once each column is cast back to the table's type (Iceberg widens
// unsigned and narrow integers and reads timestamps in microseconds). A
// schema Iceberg cannot hold exactly must be refused as such.
func checkIceberg(t *testing.T, b blob.Bucket, dir string, schema *arrow.Schema, want rows, what string) {
	t.Helper()
	loc, err := layout.LocationOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc}, time.Now())
	if errors.Is(err, layout.ErrUnsupported) {
		t.Logf("%s: no Iceberg view: %v", what, err)
		return
	}
	if err != nil {
		t.Fatalf("%s: iceberg export: %v", what, err)
	}
	tbl, err := itable.NewFromLocation(ctx, itable.Identifier{"rt", "t"}, res.MetadataLocation, iceio.LoadFSFunc(nil, res.MetadataLocation), nil)
	if err != nil {
		t.Fatalf("%s: iceberg metadata: %v", what, err)
	}
	_, it, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatalf("%s: iceberg scan: %v", what, err)
	}
	var recs []arrow.RecordBatch
	for rec, err := range it {
		if err != nil {
			t.Fatalf("%s: iceberg scan: %v", what, err)
		}
		cols := make([]arrow.Array, rec.NumCols())
		for i := range cols {
			cols[i], err = castBack(rec.Column(i), schema.Field(i).Type)
			if errors.Is(err, arrow.ErrNotImplemented) {
				// Arrow casts no maps, and some nested casts fail inside
				// arrow-go: those columns are not compared.
				t.Logf("%s: iceberg-go's %s is not compared (no cast to %s)", what, rec.Column(i).DataType(), schema.Field(i).Type)
				for _, c := range cols[:i] {
					c.Release()
				}
				rec.Release()
				return
			}
			if err != nil {
				t.Fatalf("%s: casting iceberg-go's %s back to %s: %v", what, rec.Column(i).DataType(), schema.Field(i).Type, err)
			}
		}
		recs = append(recs, array.NewRecordBatch(schema, cols, rec.NumRows()))
		for _, c := range cols {
			c.Release()
		}
		rec.Release()
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	sameRows(t, what+": iceberg-go scan of the Iceberg view", want, canonical(t, recs...))
}

// castBack casts what iceberg-go read to the table's type. arrow-go's cast
// panics on some nested types (a list of structs holding a timestamp in
// seconds, for one: "slice bounds out of range" building the child); that
// is an ErrNotImplemented here, like a cast arrow-go does not offer.
func castBack(col arrow.Array, to arrow.DataType) (out arrow.Array, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("%w: arrow-go's cast panicked: %v", arrow.ErrNotImplemented, r)
		}
	}()
	return compute.CastArray(ctx, col, compute.SafeCastOptions(to))
}

// jsonLines scans through the server as JSON lines and decodes them back
// into the schema's types, row by row.
func jsonLines(t *testing.T, url string, schema *arrow.Schema) rows {
	t.Helper()
	resp, err := httpGet(url + "/api/v1/tables/t/rows?format=jsonl")
	if err != nil {
		t.Fatal(err)
	}
	bld := array.NewRecordBuilder(memoryDefault, schema)
	defer bld.Release()
	sc := bufio.NewScanner(bytes.NewReader(resp))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if err := bld.UnmarshalJSON(sc.Bytes()); err != nil {
			t.Fatalf("a scanned JSON line does not decode: %v\n%s", err, sc.Text())
		}
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	return canonical(t, rec)
}

// checkStats compares each fragment's recorded statistics with its rows.
func checkStats(t *testing.T, snap *table.Snapshot) {
	t.Helper()
	schema := snap.Manifest().Schema()
	for _, f := range snap.Manifest().Fragments {
		if f.Deletion != nil {
			continue
		}
		for _, cs := range f.Columns {
			idx := schema.FieldIndices(cs.Name)[0]
			var nulls int64
			var lo, hi *value.Value
			for rec, err := range snap.Scan(ctx, table.ScanOptions{Fragments: []uint64{f.ID}, Columns: []string{cs.Name}}) {
				if err != nil {
					t.Fatal(err)
				}
				col := rec.Column(0)
				nulls += int64(col.NullN())
				for i := range col.Len() {
					v, ok := format.ValueAt(col, i)
					if !ok || (v.Kind == value.KindFloat && v.F != v.F) {
						continue
					}
					if lo == nil || value.Compare(v, *lo) < 0 {
						c := v
						lo = &c
					}
					if hi == nil || value.Compare(v, *hi) > 0 {
						c := v
						hi = &c
					}
				}
			}
			if nulls != cs.Nulls {
				t.Fatalf("fragment %d column %s: %d nulls, statistics say %d", f.ID, cs.Name, nulls, cs.Nulls)
			}
			if value.KindOf(schema.Field(idx).Type) == value.KindNone {
				continue
			}
			if cs.Min != nil && (lo == nil || value.Compare(*cs.Min, *lo) != 0 || value.Compare(*cs.Max, *hi) != 0) {
				t.Fatalf("fragment %d column %s: statistics [%v, %v], rows [%v, %v]", f.ID, cs.Name, cs.Min, cs.Max, lo, hi)
			}
		}
	}
}

// checkFilter: a filtered scan holds exactly the rows of the unfiltered
// scan that the predicate matches, evaluated here row by row.
func checkFilter(t *testing.T, g *gen, snap *table.Snapshot) {
	t.Helper()
	schema := snap.Manifest().Schema()
	var cols []int
	for i, f := range schema.Fields() {
		if value.KindOf(f.Type) != value.KindNone {
			cols = append(cols, i)
		}
	}
	for range 4 {
		ci := cols[g.r.IntN(len(cols))]
		name := schema.Field(ci).Name
		// A literal from the data, so that the filter matches something.
		var lit *value.Value
		var matchAll []int64
		var all []struct {
			id int64
			v  value.Value
			ok bool
		}
		proj := []string{"id", name}
		if name == "id" {
			proj = proj[:1]
		}
		for rec, err := range snap.Scan(ctx, table.ScanOptions{Columns: proj}) {
			if err != nil {
				t.Fatal(err)
			}
			ids := rec.Column(0).(*array.Int64)
			for i := range int(rec.NumRows()) {
				v, ok := format.ValueAt(rec.Column(len(proj)-1), i)
				if ok && v.Kind == value.KindFloat && v.F != v.F {
					ok = false
				}
				all = append(all, struct {
					id int64
					v  value.Value
					ok bool
				}{ids.Value(i), v, ok})
				if ok && (lit == nil || g.r.IntN(8) == 0) {
					c := v
					lit = &c
				}
			}
		}
		if lit == nil {
			continue
		}
		ops := []expr.Op{expr.OpEq, expr.OpNe, expr.OpLt, expr.OpLe, expr.OpGt, expr.OpGe}
		op := ops[g.r.IntN(len(ops))]
		pred := expr.Cmp{Column: name, Op: op, Value: *lit}
		for _, r := range all {
			if !r.ok {
				continue
			}
			c := value.Compare(r.v, *lit)
			if (op == expr.OpEq && c == 0) || (op == expr.OpNe && c != 0) || (op == expr.OpLt && c < 0) ||
				(op == expr.OpLe && c <= 0) || (op == expr.OpGt && c > 0) || (op == expr.OpGe && c >= 0) {
				matchAll = append(matchAll, r.id)
			}
		}
		got := collect(t, snap.Scan(ctx, table.ScanOptions{Columns: []string{"id"}, Filter: pred}))
		if len(got) != len(matchAll) {
			t.Fatalf("filter %s: %d rows, the unfiltered scan filtered has %d", pred, len(got), len(matchAll))
		}
		for _, id := range matchAll {
			if _, ok := got[id]; !ok {
				t.Fatalf("filter %s: row %d missing", pred, id)
			}
		}
	}
}

func writeParquet(t *testing.T, dir string, rec arrow.RecordBatch) string {
	t.Helper()
	defer rec.Release()
	p := filepath.Join(dir, "rows.parquet")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WriteParquet(t, f, rec, parquet.NewWriterProperties(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())) // closes f
	return p
}

func writeJSONL(t *testing.T, dir string, rec arrow.RecordBatch) string {
	t.Helper()
	defer rec.Release()
	var buf bytes.Buffer
	if err := array.RecordToJSON(rec, &buf); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "rows.jsonl")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeCSV(t *testing.T, dir string, rec arrow.RecordBatch) string {
	t.Helper()
	defer rec.Release()
	p := filepath.Join(dir, "rows.csv")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := csv.NewWriter(f, rec.Schema(), csv.WithHeader(true), csv.WithNullWriter(""))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return p
}

var memoryDefault = testenv.Arrow

func httpGet(u string) ([]byte, error) {
	resp, err := http.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET %s: %d %s", u, resp.StatusCode, data)
	}
	return io.ReadAll(resp.Body)
}
