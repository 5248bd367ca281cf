package engine_test

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/changes"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
)

// Golden tables. Each format this build writes has tables written by the
// build that introduced it, under testdata/tables/<major.minor>/, with
// what they hold in expected.json; every later build must read them,
// append to them, merge their shards' leftovers, compact and collect
// them (TestGoldenTables). A change of the format adds its folder:
//
//	go test ./engine -run TestGoldenTables -write-golden
//
// writes the folder of this build's format when it is not there (one
// already there is never rewritten: it is what an older build wrote).
var writeGolden = flag.Bool("write-golden", false, "write the golden tables of this build's format under testdata/tables, if not there")

// goldenFormat names this build's format as the golden folders do.
var goldenFormat = fmt.Sprintf("%d.%d", format.FormatMajor, format.FormatMinor)

// goldenExpected is what a golden table holds, as its writer saw it.
type goldenExpected struct {
	Format    string            `json:"format"` // its manifests' major.minor
	Version   uint64            `json:"version"`
	Rows      []string          `json:"rows"`  // the latest version's, as JSON objects sorted by id
	Fresh     []string          `json:"fresh"` // and with the rows its shards acknowledged and did not merge
	Tags      map[string]uint64 `json:"tags"`
	Consumers map[string]uint64 `json:"consumers"`
	Groups    []string          `json:"groups"`
	Indexes   []string          `json:"indexes"`
	Key       string            `json:"key"`   // an idempotency key the table records
	Shard     string            `json:"shard"` // the shard left mid-flight ("" for none)
	Columns   []string          `json:"columns"`
	ClusterBy []string          `json:"cluster_by,omitempty"` // the cluster key's columns (from 1.1)
}

// goldenRows reads rows as sorted JSON objects.
func goldenRows(t *testing.T, seq func(func(arrow.RecordBatch, error) bool)) []string {
	t.Helper()
	var out []string
	for rec, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := array.RecordToJSON(rec, &buf); err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(buf.String()) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		var x, y struct{ ID int64 }
		_ = json.Unmarshal([]byte(a), &x)
		_ = json.Unmarshal([]byte(b), &y)
		return cmp.Or(cmp.Compare(x.ID, y.ID), strings.Compare(a, b))
	})
	return out
}

func jsonRows(t *testing.T, schema *arrow.Schema, lines ...string) []arrow.RecordBatch {
	t.Helper()
	recs, err := ingest.ReadJSONLines(strings.NewReader(strings.Join(lines, "\n")+"\n"), schema, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func rangeRows(from, to int, row func(i int) string) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, row(i))
	}
	return out
}

// writeGoldenTables writes this build's golden tables into dir: "plain",
// a table never altered; "evolved", whose schema changed, which holds
// every kind of object (fragments, deletion vectors, a key index, a tag,
// a consumer, a group, idempotency records, compaction history, a shard
// left mid-flight with a flushed generation not merged and a WAL entry
// not flushed); and "clustered", with a cluster key and fragments sorted
// by it.
func writeGoldenTables(t *testing.T, dir string) {
	for _, name := range []string{"plain", "evolved", "clustered"} {
		b, err := blob.Open(ctx, "file://"+filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		exp := writeGoldenTable(t, b, name)
		data, err := json.MarshalIndent(exp, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".expected.json"), append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
}

func writeGoldenTable(t *testing.T, b blob.Bucket, kind string) goldenExpected {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "worker", Type: arrow.BinaryTypes.String},
		{Name: "reward", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	if _, _, err := engine.Create(ctx, b, schema, "golden", nil); err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(ctx, b, &engine.Options{Log: quiet, Writer: "golden"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	row := func(i int) string { return fmt.Sprintf(`{"id":%d,"worker":"w%02d","reward":%g}`, i, i%4, float64(i)/8) }
	key := &format.Idempotency{Producer: "golden-import-1"}
	for i, k := range []*format.Idempotency{key, nil} {
		if _, err := db.Append(ctx, engine.AppendOptions{Key: k}, jsonRows(t, schema, rangeRows(i*100, i*100+100, row)...)...); err != nil {
			t.Fatal(err)
		}
	}
	exp := goldenExpected{Key: key.Producer, Tags: map[string]uint64{}, Consumers: map[string]uint64{}}
	if _, _, err := db.Delete(ctx, mustFilter(t, "id < 10")); err != nil {
		t.Fatal(err)
	}
	if kind == "clustered" {
		if _, err := db.Alter(ctx, evolve.ColumnChange{Op: evolve.ClusterBy, Columns: []string{"worker", "reward"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Compact(ctx, engine.CompactOptions{Policy: &engine.Policy{MinFragments: 2}}); err != nil {
			t.Fatal(err)
		}
	}
	if kind == "evolved" {
		set, err := expr.ParseAssignments("reward = 1.0")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Update(ctx, mustFilter(t, "id < 20"), set); err != nil {
			t.Fatal(err)
		}
		res, err := db.CreateIndex(ctx, "id")
		if err != nil {
			t.Fatal(err)
		}
		if err := table.CreateTag(ctx, b, "before-alter", res.Version); err != nil {
			t.Fatal(err)
		}
		exp.Tags["before-alter"] = res.Version
		if err := table.SetConsumer(ctx, b, "reader", 3); err != nil {
			t.Fatal(err)
		}
		exp.Consumers["reader"] = 3
		if _, err := changes.ReadGroupShare(ctx, b, "trainers", "m1", changes.GroupOptions{Partitions: 4, From: 2}, nil, 0); err != nil {
			t.Fatal(err)
		}
		exp.Groups = []string{"trainers"}
		if _, err := db.Alter(ctx, evolve.ColumnChange{Op: evolve.AddColumn, Column: "note", Type: arrow.BinaryTypes.String},
			evolve.ColumnChange{Op: evolve.RenameColumn, Column: "reward", To: "score"}); err != nil {
			t.Fatal(err)
		}
		schema = latestSchema(t, b)
		note := func(i int) string {
			return fmt.Sprintf(`{"id":%d,"worker":"w%02d","score":%g,"note":"n%d"}`, i, i%4, float64(i)/8, i)
		}
		if _, err := db.Append(ctx, engine.AppendOptions{}, jsonRows(t, schema, rangeRows(200, 250, note)...)...); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Append(ctx, engine.AppendOptions{Keys: []string{"id"}}, jsonRows(t, schema, rangeRows(245, 255, note)...)...); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Compact(ctx, engine.CompactOptions{Policy: &engine.Policy{MinFragments: 2}}); err != nil {
			t.Fatal(err)
		}
		// A shard left mid-flight: a generation flushed and not merged,
		// and a WAL entry not flushed, as a worker killed leaves them.
		exp.Shard = "golden-w1"
		w, err := engine.Open(ctx, b, &engine.Options{Log: quiet, Writer: "golden-w1",
			Shard: engine.ShardOptions{Shard: exp.Shard, FlushInterval: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Append(ctx, engine.AppendOptions{}, jsonRows(t, schema, rangeRows(400, 420, note)...)...); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Append(ctx, engine.AppendOptions{}, jsonRows(t, schema, rangeRows(420, 425, note)...)...); err != nil {
			t.Fatal(err)
		}
		// w is abandoned, not closed: closing would flush the entry.
	}
	return describeGolden(t, b, db, exp)
}

// describeGolden reads what the table holds now into exp.
func describeGolden(t *testing.T, b blob.Bucket, db *engine.DB, exp goldenExpected) goldenExpected {
	t.Helper()
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := s.Manifest()
	major, minor := m.Format()
	exp.Format, exp.Version = fmt.Sprintf("%d.%d", major, minor), m.Version
	for _, f := range m.Schema().Fields() {
		exp.Columns = append(exp.Columns, f.Name)
	}
	exp.Rows = goldenRows(t, s.Scan(ctx, table.ScanOptions{}))
	exp.Fresh = goldenRows(t, db.ScanFresh(ctx, table.ScanOptions{}))
	for _, ix := range m.Indexes {
		exp.Indexes = append(exp.Indexes, ix.Column)
	}
	exp.ClusterBy, _, _ = evolve.ClusterColumns(m.Schema(), m.ClusterBy)
	return exp
}

// TestGoldenTables reads, appends to, merges, compacts and collects the
// golden tables of every format (copies of them: testdata stays as it
// is), checking that each holds what its writer saw.
func TestGoldenTables(t *testing.T) {
	if *writeGolden {
		dir := filepath.Join("testdata", "tables", goldenFormat)
		if _, err := os.Stat(dir); err == nil {
			t.Fatalf("%s is there already: a golden table is never rewritten", dir)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeGoldenTables(t, dir)
	}
	formats, err := filepath.Glob(filepath.Join("testdata", "tables", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(formats, filepath.Join("testdata", "tables", goldenFormat)) {
		t.Fatalf("no golden tables of this build's format %s: write them (go test ./engine -run TestGoldenTables -write-golden) and commit them", goldenFormat)
	}
	for _, dir := range formats {
		names, err := filepath.Glob(filepath.Join(dir, "*.expected.json"))
		if err != nil || len(names) == 0 {
			t.Fatalf("%s holds no golden table (%v)", dir, err)
		}
		for _, name := range names {
			name = strings.TrimSuffix(filepath.Base(name), ".expected.json")
			t.Run(filepath.Base(dir)+"/"+name, func(t *testing.T) { checkGolden(t, dir, name) })
		}
	}
}

func checkGolden(t *testing.T, dir, name string) {
	data, err := os.ReadFile(filepath.Join(dir, name+".expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp goldenExpected
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if err := os.CopyFS(work, os.DirFS(filepath.Join(dir, name))); err != nil {
		t.Fatal(err)
	}
	b, err := blob.Open(ctx, "file://"+work)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	db, err := engine.Open(ctx, b, &engine.Options{Log: quiet, Writer: "golden-check"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := describeGolden(t, b, db, goldenExpected{Key: exp.Key, Shard: exp.Shard, Groups: exp.Groups, Tags: map[string]uint64{}, Consumers: map[string]uint64{}})
	for tag := range exp.Tags {
		s, err := table.Open(ctx, b, &table.OpenOptions{Tag: tag})
		if err != nil {
			t.Fatalf("tag %s: %v", tag, err)
		}
		got.Tags[tag] = s.Manifest().Version
	}
	cs, err := table.ConsumersAndGroups(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if _, ok := exp.Consumers[c.Name]; ok {
			got.Consumers[c.Name] = c.Version
		}
	}
	for _, g := range exp.Groups {
		if _, err := table.ReadGroup(ctx, b, g); err != nil {
			t.Errorf("group %s: %v", g, err)
		}
	}
	if a, b := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", exp); a != b {
		t.Fatalf("the golden table %s reads\n%s\nwant\n%s", name, a, b)
	}
	// The append its writer named is recorded (a name is kept an hour:
	// the record is read, its window long past).
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(m.Producers, func(r format.ProducerRecord) bool {
		return r.Producer == (format.Idempotency{Producer: exp.Key}).Key(0, time.Now()).Producer
	}) {
		t.Fatalf("the named append %q is not recorded: %+v", exp.Key, m.Producers)
	}
	schema := m.Schema()
	// The shard's leftovers merge in: the latest version then holds the
	// fresh rows.
	want := exp.Fresh
	if exp.Shard != "" {
		if _, err := db.Adopt(ctx, exp.Shard, engine.AdoptOptions{}); err != nil {
			t.Fatalf("adopting %s: %v", exp.Shard, err)
		}
	}
	if rows := goldenRows(t, mustOpen(t, b).Scan(ctx, table.ScanOptions{})); !slices.Equal(rows, want) {
		t.Fatalf("after merging the shard's leftovers: %d rows, want %d", len(rows), len(want))
	}
	// Append, compact, collect: the rows stay.
	more := jsonRows(t, schema, `{"id":1000,"worker":"w99"}`)
	if _, err := db.Append(ctx, engine.AppendOptions{}, more...); err != nil {
		t.Fatal(err)
	}
	want = append(slices.Clone(want), goldenRows(t, func(yield func(arrow.RecordBatch, error) bool) {
		for _, rec := range more {
			if !yield(rec, nil) {
				return
			}
		}
	})...)
	if _, err := db.Compact(ctx, engine.CompactOptions{Policy: &engine.Policy{MinFragments: 2}}); err != nil {
		t.Fatal(err)
	}
	// Collected as a day later: every version but the newest, those its
	// tag and its consumer hold, and what only they used go.
	if gc, err := db.GC(ctx, engine.GCOptions{Policy: &engine.GCPolicy{KeepVersions: 1}, Now: time.Now().Add(24 * time.Hour)}); err != nil || len(gc.VersionsDeleted) == 0 {
		t.Fatalf("collection: %+v, %v", gc, err)
	}
	if rows := goldenRows(t, mustOpen(t, b).Scan(ctx, table.ScanOptions{})); !slices.Equal(rows, want) {
		t.Fatalf("after an append, a compaction and a collection: %d rows, want %d", len(rows), len(want))
	}
	if res, err := db.Repair(ctx, false); err != nil || len(res.Missing) > 0 {
		t.Fatalf("repair's check after all: %+v, %v", res, err)
	}
}

func mustFilter(t *testing.T, s string) expr.Predicate {
	t.Helper()
	p, err := expr.ParseFilter(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func latestSchema(t *testing.T, b blob.Bucket) *arrow.Schema {
	t.Helper()
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	return m.Schema()
}

func mustOpen(t *testing.T, b blob.Bucket) *table.Snapshot {
	t.Helper()
	s, err := table.Open(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A table a newer build wrote: a higher minor format version is read, and
// refused to every writer before it writes anything, naming both
// versions; a higher major version is refused to readers too.
func TestNewerFormatIsRefused(t *testing.T) {
	work := t.TempDir()
	if err := os.CopyFS(work, os.DirFS(filepath.Join("testdata", "tables", goldenFormat, "plain"))); err != nil {
		t.Fatal(err)
	}
	b, err := blob.Open(ctx, "file://"+work)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(work, filepath.FromSlash(format.ManifestKey(m.Version)))
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	plant := func(major, minor uint16) {
		data := slices.Clone(orig)
		binary.LittleEndian.PutUint16(data[8:], major)
		binary.LittleEndian.PutUint16(data[10:], minor)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	objects := func() []string {
		var keys []string
		for o, err := range blob.List(ctx, b, "", 0) {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, o.Key)
		}
		return keys
	}
	plant(format.FormatMajor, format.FormatMinor+1)
	newer := fmt.Sprintf("format %d.%d, newer than this build's %d.%d", format.FormatMajor, format.FormatMinor+1, format.FormatMajor, format.FormatMinor)
	if rows := goldenRows(t, mustOpen(t, b).Scan(ctx, table.ScanOptions{})); len(rows) == 0 {
		t.Fatal("a newer minor version is not read")
	}
	before := objects()
	rows := jsonRows(t, mustOpen(t, b).Manifest().Schema(), `{"id":7,"worker":"w7"}`)
	db, err := engine.Open(ctx, b, &engine.Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Append(ctx, engine.AppendOptions{}, rows...)
	if !errors.Is(err, format.ErrUnsupportedFormat) || !strings.Contains(err.Error(), newer) || engine.Code(err) != api.CodeUnsupportedFormat {
		t.Fatalf("a direct append: %v", err)
	}
	w, err := engine.Open(ctx, b, &engine.Options{Log: quiet, Shard: engine.ShardOptions{Shard: "w1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Append(ctx, engine.AppendOptions{}, rows...); !errors.Is(err, format.ErrUnsupportedFormat) || !strings.Contains(err.Error(), newer) {
		t.Fatalf("an append through a shard: %v", err)
	}
	if _, err := db.Compact(ctx, engine.CompactOptions{Policy: &engine.Policy{MinFragments: 2}}); !errors.Is(err, format.ErrUnsupportedFormat) {
		t.Fatalf("a compaction: %v", err)
	}
	if _, _, err := db.Delete(ctx, mustFilter(t, "id = 50")); !errors.Is(err, format.ErrUnsupportedFormat) {
		t.Fatalf("a delete: %v", err)
	}
	if _, err := db.GC(ctx, engine.GCOptions{Policy: &engine.GCPolicy{KeepVersions: 1}, Now: time.Now().Add(24 * time.Hour)}); !errors.Is(err, format.ErrUnsupportedFormat) {
		t.Fatalf("a collection: %v", err)
	}
	// Nothing of the table's was written or deleted: a compaction's lease
	// and run record are all there is.
	after := slices.DeleteFunc(objects(), func(k string) bool { return strings.HasPrefix(k, "_compactor/") })
	if !slices.Equal(before, after) {
		t.Fatalf("the refused writers changed the table's objects from\n%v\nto\n%v", before, after)
	}
	plant(format.FormatEvolved+1, 0)
	if _, err := table.ReadLatest(ctx, b); !errors.Is(err, format.ErrUnsupportedFormat) || !strings.Contains(err.Error(), fmt.Sprintf("format %d.0", format.FormatEvolved+1)) {
		t.Fatalf("a newer major version read: %v", err)
	}
}
