package compactor_test

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/value"
	"github.com/stratadb/strata/walshard"
)

// The history campaign: a few dozen seeds in the normal run, more with
// -history.seeds (or STRATA_HISTORY_SEEDS), one replayed with
// -history.start=N -history.seeds=1.
var (
	historySeeds = flag.Int("history.seeds", 0, "seeds of TestVolumeCompactionOverRandomHistories (default 24, or STRATA_HISTORY_SEEDS)")
	historyStart = flag.Uint64("history.start", 1, "first seed of TestVolumeCompactionOverRandomHistories")
	historySteps = flag.Int("history.steps", 10, "operations per seed of TestVolumeCompactionOverRandomHistories")
)

func historySeedCount() int {
	if *historySeeds > 0 {
		return *historySeeds
	}
	if n, err := strconv.Atoi(os.Getenv("STRATA_HISTORY_SEEDS")); err == nil && n > 0 {
		return n
	}
	return 24
}

// Random histories of direct appends (one to three batches of 1 to 26,000
// rows per fragment, so that fragments have one row group or several, full
// or not), shard merges (several generations, WAL entries reused as
// fragments or not), deletes (ranges of ids, values, notes, and ids and
// values together: they hit small fragments and large compacted ones
// alike) and compactions, on tables with a blob column of either binary
// type or none. A compaction with a random policy and options runs after
// every operation and must succeed, and then the table holds exactly the
// live rows of an oracle, each with the values it was written with.
func TestVolumeCompactionOverRandomHistories(t *testing.T) {
	n := historySeedCount()
	for seed := *historyStart; seed < *historyStart+uint64(n); seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			// Seeds share nothing (each its own bucket and table), so they
			// run at once, as many as -parallel allows. Under the race
			// detector this was the longest test of the suite (180 s of
			// the machine's cores, against 15 s without): a volume test.
			t.Parallel()
			t.Logf("seed %d; replay: go test ./compactor -run 'TestVolumeCompactionOverRandomHistories$' -history.start=%d -history.seeds=1 -v", seed, seed)
			h := newHistory(t, seed)
			for step := range *historySteps {
				h.step(step)
			}
			t.Logf("%d live rows in %d fragments; %s", len(h.live), len(open(t, h.b).Manifest().Fragments), strings.Join(h.trace, "; "))
		})
	}
}

// history is one seed's table and the oracle of its live rows. Every row
// is a function of its id (histVal, histNote, histBlob), so the oracle is
// the set of live ids.
type history struct {
	t      *testing.T
	rng    *rand.Rand
	b      blob.Bucket
	tb     *commit.Table
	schema *arrow.Schema
	live   map[int64]bool
	next   int64
	trace  []string
}

func newHistory(t *testing.T, seed uint64) *history {
	h := &history{t: t, rng: rand.New(rand.NewPCG(seed, 0x5eed)), live: map[int64]bool{}}
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "val", Type: arrow.PrimitiveTypes.Int64},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
	}
	switch h.rng.IntN(3) { // a blob column, of either binary type, or none
	case 0:
		fields = append(fields, arrow.Field{Name: "blob", Type: arrow.BinaryTypes.Binary})
	case 1:
		fields = append(fields, arrow.Field{Name: "blob", Type: arrow.BinaryTypes.LargeBinary})
	}
	h.schema = arrow.NewSchema(fields, nil)
	u := "mem://"
	if h.rng.IntN(4) == 0 {
		u = "file://" + t.TempDir()
	}
	var err error
	if h.b, err = blob.Open(ctx, u); err != nil {
		t.Fatal(err)
	}
	if _, err := commit.Create(ctx, h.b, h.schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	if h.tb, err = commit.OpenTable(ctx, h.b, nil); err != nil {
		t.Fatal(err)
	}
	h.logf("%d columns on %s", len(fields), u[:4])
	return h
}

func (h *history) logf(format string, args ...any) {
	h.trace = append(h.trace, fmt.Sprintf(format, args...))
}

// fail stops the seed with the operations that led there.
func (h *history) fail(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf("%s\nafter: %s", fmt.Sprintf(format, args...), strings.Join(h.trace, "; "))
}

// step runs one random operation, compacts with a random policy, and
// checks every row.
func (h *history) step(i int) {
	h.t.Helper()
	switch r := h.rng.IntN(10); {
	case r < 4:
		h.appendDirect()
	case r < 6:
		h.mergeShard()
	case r < 9:
		h.delete()
	default:
		h.compact() // twice in a row: a run over the last one's output
	}
	if rows := open(h.t, h.b).Manifest().Rows(); rows != int64(len(h.live)) {
		h.fail("step %d: the table holds %d rows, the oracle %d", i, rows, len(h.live))
	}
	h.compact()
	h.check(fmt.Sprintf("step %d", i))
}

// batchRows draws a batch size: a few rows, hundreds, or thousands to
// tens of thousands (one row group and more) while the seed has written
// fewer than 60,000 rows.
func (h *history) batchRows() int {
	switch r := h.rng.IntN(10); {
	case r < 4:
		return 1 + h.rng.IntN(50)
	case r < 7 || h.next > 60_000:
		return 100 + h.rng.IntN(3000)
	default:
		return 2000 + h.rng.IntN(24000)
	}
}

// batches builds n batches of new rows; the caller adds their ids to the
// oracle once they are in the table.
func (h *history) batches(n int) ([]arrow.RecordBatch, []int64) {
	var recs []arrow.RecordBatch
	var ids []int64
	for range n {
		rows := h.batchRows()
		from := h.next
		h.next += int64(rows)
		recs = append(recs, histBatch(h.schema, from, rows))
		for id := from; id < h.next; id++ {
			ids = append(ids, id)
		}
	}
	return recs, ids
}

func release(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// appendDirect commits one to three batches as one fragment.
func (h *history) appendDirect() {
	recs, ids := h.batches(1 + h.rng.IntN(3))
	defer release(recs)
	if _, err := h.tb.Append(ctx, recs...); err != nil {
		h.fail("append of %d rows: %v", len(ids), err)
	}
	for _, id := range ids {
		h.live[id] = true
	}
	h.logf("append %d rows in %d batches", len(ids), len(recs))
}

// mergeShard writes one to three generations through a shard — WAL
// entries reused as fragments or not — and merges them.
func (h *history) mergeShard() {
	opts := &walshard.Options{Shard: fmt.Sprintf("s%d", h.rng.IntN(2))}
	if h.rng.IntN(2) == 0 {
		opts.ReuseBytes = []int64{1, 64 << 10}[h.rng.IntN(2)]
	}
	s, err := walshard.Open(ctx, h.b, opts)
	if err != nil {
		h.fail("open shard: %v", err)
	}
	defer s.Close()
	var all []int64
	gens := 1 + h.rng.IntN(3)
	for range gens {
		for range 1 + h.rng.IntN(3) {
			recs, ids := h.batches(1)
			err := s.Append(ctx, recs...)
			release(recs)
			if err != nil {
				h.fail("shard append: %v", err)
			}
			all = append(all, ids...)
		}
		if _, err := s.Flush(ctx); err != nil {
			h.fail("flush: %v", err)
		}
	}
	if _, err := s.Merge(ctx); err != nil {
		h.fail("merge: %v", err)
	}
	for _, id := range all {
		h.live[id] = true
	}
	h.logf("merge %d rows in %d generations (reuse %d)", len(all), gens, opts.ReuseBytes)
}

// delete removes the rows of a random filter: a range of ids (a few, or
// thousands), a fraction of every fragment's rows by value, a note, or a
// range and a value together.
func (h *history) delete() {
	if h.next == 0 {
		return
	}
	lo := h.rng.Int64N(h.next)
	hi := lo + []int64{1 + h.rng.Int64N(100), 1000 + h.rng.Int64N(30000)}[h.rng.IntN(2)]
	v := h.rng.Int64N(300)
	note := string(rune('a' + h.rng.IntN(26)))
	var pred expr.Predicate
	var match func(id int64) bool
	switch h.rng.IntN(4) {
	case 0:
		pred = expr.And(expr.Ge("id", value.Int(lo)), expr.Lt("id", value.Int(hi)))
		match = func(id int64) bool { return id >= lo && id < hi }
	case 1:
		pred = expr.Lt("val", value.Int(v))
		match = func(id int64) bool { return histVal(id) < v }
	case 2:
		pred = expr.Lt("note", value.String(note))
		match = func(id int64) bool { n, ok := histNote(id); return ok && n < note }
	default:
		pred = expr.And(expr.Ge("id", value.Int(lo)), expr.Lt("id", value.Int(hi)), expr.In("val", value.Int(v), value.Int(v+500)))
		match = func(id int64) bool { return id >= lo && id < hi && (histVal(id) == v || histVal(id) == v+500) }
	}
	_, n, err := h.tb.Delete(ctx, pred)
	if err != nil {
		h.fail("delete %v: %v", pred, err)
	}
	var want int64
	for id := range h.live {
		if match(id) {
			delete(h.live, id)
			want++
		}
	}
	if n != want {
		h.fail("delete %v: %d rows deleted, the oracle says %d", pred, n, want)
	}
	h.logf("delete %v: %d rows", pred, n)
}

// compact runs one compaction with a random policy and options; it must
// succeed, and commit when it planned anything.
func (h *history) compact() {
	pick := func(vs ...int64) int64 { return vs[h.rng.IntN(len(vs))] }
	p := &compactor.Policy{
		MinFragments:       int(pick(0, 1, 2, 4)),
		TargetRows:         pick(0, 3000, 20000, 60000),
		TargetBytes:        pick(0, 256<<10, 4<<20),
		MaxSourceFragments: int(pick(0, 2, 3, 8)),
		DeletedFraction:    []float64{0, 0.01, 0.5}[h.rng.IntN(3)],
	}
	// Small up to the target itself: an output fragment is rewritten again.
	if h.rng.IntN(3) == 0 {
		p.SmallRows, p.SmallBytes = cmp.Or(p.TargetRows, 1_000_000), cmp.Or(p.TargetBytes, 512<<20)
	}
	o := &compactor.Options{
		Recode:         h.rng.IntN(5) == 0,
		Parallelism:    int(pick(0, 1, 3)),
		ReadAheadBytes: pick(0, 1, 1<<20),
	}
	res, err := compactor.Compact(ctx, h.b, p, o)
	if err != nil {
		h.fail("compaction (policy %+v, options %+v): %v\n%v", *p, *o, err, res.Plan)
	}
	if len(res.Plan.Bins) > 0 && res.Version == 0 {
		h.fail("compaction planned %v and committed nothing", res.Plan)
	}
	if res.RowsAfter != int64(len(h.live)) {
		h.fail("compaction left %d rows, the oracle holds %d", res.RowsAfter, len(h.live))
	}
	h.logf("compact %d -> %d fragments (%d bins, %d copied, recode %v)", res.FragmentsBefore, res.FragmentsAfter, len(res.Plan.Bins), res.BinsCopied, o.Recode)
}

// check scans the latest version: exactly the live ids, once each, every
// column as written.
func (h *history) check(what string) {
	h.t.Helper()
	seen := make(map[int64]bool, len(h.live))
	for rec, err := range open(h.t, h.b).Scan(ctx, table.ScanOptions{}) {
		if err != nil {
			h.fail("%s: scan: %v", what, err)
		}
		if err := checkHistRows(rec, h.live, seen); err != nil {
			h.fail("%s: %v", what, err)
		}
	}
	if len(seen) != len(h.live) {
		h.fail("%s: %d rows scanned, the oracle holds %d", what, len(seen), len(h.live))
	}
}

func checkHistRows(rec arrow.RecordBatch, live, seen map[int64]bool) error {
	ids := rec.Column(0).(*array.Int64).Int64Values()
	vals := rec.Column(1).(*array.Int64).Int64Values()
	notes := rec.Column(2).(*array.String)
	for i, id := range ids {
		switch {
		case !live[id]:
			return fmt.Errorf("row %d is not live", id)
		case seen[id]:
			return fmt.Errorf("row %d appears twice", id)
		case vals[i] != histVal(id):
			return fmt.Errorf("row %d: val %d, want %d", id, vals[i], histVal(id))
		}
		seen[id] = true
		if n, ok := histNote(id); notes.IsNull(i) == ok || (ok && notes.Value(i) != n) {
			return fmt.Errorf("row %d: note %q (null %v), want %q (null %v)", id, notes.Value(i), notes.IsNull(i), n, !ok)
		}
		if rec.NumCols() < 4 {
			continue
		}
		var got []byte
		switch col := rec.Column(3).(type) {
		case *array.Binary:
			got = col.Value(i)
		case *array.LargeBinary:
			got = col.Value(i)
		}
		if !bytes.Equal(got, histBlob(id)) {
			return fmt.Errorf("row %d: a blob of %d bytes, written with %d", id, len(got), len(histBlob(id)))
		}
	}
	return nil
}

// histMix is splitmix64's finaliser: it scatters ids.
func histMix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func histVal(id int64) int64 { return int64(histMix(uint64(id)) % 1000) }

// histNote is null for one row in seven, else a short word.
func histNote(id int64) (string, bool) {
	x := histMix(uint64(id) ^ 0x6e6f7465)
	if x%7 == 0 {
		return "", false
	}
	return strings.Repeat(string(rune('a'+x%26)), 1+int(x>>8%12)), true
}

// histBlob is up to 255 bytes drawn from the id, and 4 to 12 KiB for one
// row in 256: fragments of tens of thousands of rows pass 4 MiB and are
// read by ranges.
func histBlob(id int64) []byte {
	x := histMix(uint64(id) ^ 0xb10b)
	n := int(x % 256)
	if x>>16%256 == 0 {
		n = 4<<10 + int(x>>24%(8<<10))
	}
	b := make([]byte, n)
	for i := range b {
		if i%8 == 0 {
			x = histMix(x)
		}
		b[i] = byte(x >> (8 * (i % 8)))
	}
	return b
}

// histBatch builds rows from, from+1, … of schema.
func histBatch(schema *arrow.Schema, from int64, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for id := from; id < from+int64(n); id++ {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.Int64Builder).Append(histVal(id))
		if s, ok := histNote(id); ok {
			b.Field(2).(*array.StringBuilder).Append(s)
		} else {
			b.Field(2).AppendNull()
		}
		if f := b.Fields(); len(f) > 3 { // one builder type for both binary types
			f[3].(*array.BinaryBuilder).Append(histBlob(id))
		}
	}
	return b.NewRecordBatch()
}
