package table_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// A row of the property test: nil is null.
type propRow struct {
	i *int64
	f *float64
	s *string
}

// tri is SQL's three-valued truth.
type tri int

const (
	fls tri = iota
	unk
	tru
)

func triNot(a tri) tri { return 2 - a }
func triAnd(a, b tri) tri {
	return min(a, b)
}
func triOr(a, b tri) tri { return max(a, b) }

// propExpr is a random filter: its text and how SQL would evaluate it.
type propExpr struct {
	text string
	eval func(propRow) tri
}

func cmpTri(ok bool, c int, op string) tri {
	if !ok {
		return unk
	}
	var r bool
	switch op {
	case "=":
		r = c == 0
	case "!=", "<>":
		r = c != 0
	case "<":
		r = c < 0
	case "<=":
		r = c <= 0
	case ">":
		r = c > 0
	case ">=":
		r = c >= 0
	}
	if r {
		return tru
	}
	return fls
}

func sign[T int64 | float64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// likeRef matches s against a LIKE pattern of '%', '_' and plain bytes
// (no escapes), by brute force.
func likeRef(s, p string) bool {
	if p == "" {
		return s == ""
	}
	switch p[0] {
	case '%':
		for k := 0; k <= len(s); k++ {
			if likeRef(s[k:], p[1:]) {
				return true
			}
		}
		return false
	case '_':
		return s != "" && likeRef(s[1:], p[1:])
	}
	return s != "" && s[0] == p[0] && likeRef(s[1:], p[1:])
}

// num is a value of an arithmetic expression in the reference: an
// integer, or a float; ok false for null.
type num struct {
	float bool
	i     int64
	f     float64
	ok    bool
}

func (n num) asFloat() float64 {
	if n.float {
		return n.f
	}
	return float64(n.i)
}

// genArith is a random arithmetic expression over i, f and integer
// literals, and its evaluation as SQL (integer division truncating, a
// division by zero null).
func genArith(rng *rand.Rand, depth int) (string, func(propRow) num) {
	if depth == 0 || rng.IntN(3) == 0 {
		switch rng.IntN(3) {
		case 0:
			return "i", func(r propRow) num { return num{i: deref(r.i), ok: r.i != nil} }
		case 1:
			return "f", func(r propRow) num { return num{float: true, f: deref(r.f), ok: r.f != nil} }
		}
		v := int64(rng.IntN(9) - 4)
		return fmt.Sprint(v), func(propRow) num { return num{i: v, ok: true} }
	}
	if rng.IntN(6) == 0 {
		text, x := genArith(rng, depth-1)
		return "-(" + text + ")", func(r propRow) num {
			n := x(r)
			n.i, n.f = -n.i, -n.f
			return n
		}
	}
	lt, l := genArith(rng, depth-1)
	rt, rr := genArith(rng, depth-1)
	op := "+-*/%"[rng.IntN(5)]
	if op == '%' && (strings.Contains(lt, "f") || strings.Contains(rt, "f")) {
		op = '*' // % takes integers
	}
	return "(" + lt + " " + string(op) + " " + rt + ")", func(r propRow) num {
		a, b := l(r), rr(r)
		if !a.ok || !b.ok {
			return num{}
		}
		if !a.float && !b.float {
			switch op {
			case '+':
				return num{i: a.i + b.i, ok: true}
			case '-':
				return num{i: a.i - b.i, ok: true}
			case '*':
				return num{i: a.i * b.i, ok: true}
			case '/':
				return num{i: safeDiv(a.i, b.i), ok: b.i != 0}
			}
			return num{i: safeMod(a.i, b.i), ok: b.i != 0}
		}
		x, y := a.asFloat(), b.asFloat()
		switch op {
		case '+':
			return num{float: true, f: x + y, ok: true}
		case '-':
			return num{float: true, f: x - y, ok: true}
		case '*':
			return num{float: true, f: x * y, ok: true}
		}
		return num{float: true, f: x / y, ok: y != 0}
	}
}

func safeDiv(a, b int64) int64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func safeMod(a, b int64) int64 {
	if b == 0 {
		return 0
	}
	return a % b
}

func genLeaf(rng *rand.Rand) propExpr {
	ops := []string{"=", "!=", "<", "<=", ">", ">=", "<>"}
	op := ops[rng.IntN(len(ops))]
	if rng.IntN(4) == 0 {
		lt, l := genArith(rng, 2)
		rt, r := genArith(rng, 2)
		return propExpr{lt + " " + op + " " + rt, func(row propRow) tri {
			a, b := l(row), r(row)
			if !a.ok || !b.ok {
				return unk
			}
			if !a.float && !b.float {
				return cmpTri(true, sign(a.i, b.i), op)
			}
			return cmpTri(true, sign(a.asFloat(), b.asFloat()), op)
		}}
	}
	switch rng.IntN(9) {
	case 0:
		v := int64(rng.IntN(21) - 10)
		return propExpr{fmt.Sprintf("i %s %d", op, v), func(r propRow) tri { return cmpTri(r.i != nil, sign(deref(r.i), v), op) }}
	case 1:
		v := float64(rng.IntN(41)-20) / 4
		return propExpr{fmt.Sprintf("f %s %g", op, v), func(r propRow) tri { return cmpTri(r.f != nil, sign(deref(r.f), v), op) }}
	case 2:
		v := string(rune('a' + rng.IntN(5)))
		return propExpr{fmt.Sprintf("s %s '%s'", op, v), func(r propRow) tri { return cmpTri(r.s != nil, sign(deref(r.s), v), op) }}
	case 3:
		vs := []int64{int64(rng.IntN(21) - 10), int64(rng.IntN(21) - 10), int64(rng.IntN(21) - 10)}
		not := rng.IntN(2) == 0
		text := fmt.Sprintf("i IN (%d, %d, %d)", vs[0], vs[1], vs[2])
		if not {
			text = strings.Replace(text, "IN", "NOT IN", 1)
		}
		return propExpr{text, func(r propRow) tri {
			if r.i == nil {
				return unk
			}
			if slices.Contains(vs, *r.i) != not {
				return tru
			}
			return fls
		}}
	case 4:
		col := []string{"i", "f", "s"}[rng.IntN(3)]
		not := rng.IntN(2) == 0
		text := col + " IS NULL"
		if not {
			text = col + " IS NOT NULL"
		}
		return propExpr{text, func(r propRow) tri {
			null := map[string]bool{"i": r.i == nil, "f": r.f == nil, "s": r.s == nil}[col]
			if null != not {
				return tru
			}
			return fls
		}}
	case 5, 6:
		// A plain prefix (which the statistics prune by), then
		// wildcards and letters.
		pat := []string{"", "a", "ab", "b", "c", "abc"}[rng.IntN(6)]
		for range rng.IntN(3) {
			pat += string("ab%_c%"[rng.IntN(6)])
		}
		not := rng.IntN(3) == 0
		text := fmt.Sprintf("s LIKE '%s'", pat)
		if not {
			text = fmt.Sprintf("s NOT LIKE '%s'", pat)
		}
		return propExpr{text, func(r propRow) tri {
			if r.s == nil {
				return unk
			}
			if likeRef(*r.s, pat) != not {
				return tru
			}
			return fls
		}}
	default:
		lo := int64(rng.IntN(21) - 10)
		hi := lo + int64(rng.IntN(8))
		not := rng.IntN(3) == 0
		text := fmt.Sprintf("i BETWEEN %d AND %d", lo, hi)
		if not {
			text = fmt.Sprintf("i NOT BETWEEN %d AND %d", lo, hi)
		}
		return propExpr{text, func(r propRow) tri {
			if r.i == nil {
				return unk
			}
			if (*r.i >= lo && *r.i <= hi) != not {
				return tru
			}
			return fls
		}}
	}
}

func deref[T any](p *T) T {
	var z T
	if p == nil {
		return z
	}
	return *p
}

func genExpr(rng *rand.Rand, depth int) propExpr {
	if depth == 0 || rng.IntN(3) == 0 {
		return genLeaf(rng)
	}
	switch rng.IntN(3) {
	case 0:
		e := genExpr(rng, depth-1)
		return propExpr{"NOT (" + e.text + ")", func(r propRow) tri { return triNot(e.eval(r)) }}
	case 1:
		a, b := genExpr(rng, depth-1), genExpr(rng, depth-1)
		return propExpr{"(" + a.text + ") AND (" + b.text + ")", func(r propRow) tri { return triAnd(a.eval(r), b.eval(r)) }}
	}
	a, b := genExpr(rng, depth-1), genExpr(rng, depth-1)
	return propExpr{"(" + a.text + ") OR (" + b.text + ")", func(r propRow) tri { return triOr(a.eval(r), b.eval(r)) }}
}

// Every operator of the filter language, against a brute-force SQL
// evaluation of the same rows: random filters of comparisons, IN, IS
// NULL, LIKE and BETWEEN under NOT, AND, OR and parentheses select, from
// rows with nulls spread over fragments of different ranges (so that the
// statistics prune), exactly the rows SQL's WHERE would; the filter's
// printed form reads back to the same selection.
func TestVolumeFilterLanguageAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 35))
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	var rows []propRow
	var frags []format.Fragment
	for frag := range 6 {
		bld := array.NewRecordBuilder(testenv.Arrow, schema)
		for range 40 {
			var r propRow
			if frag == 5 || rng.IntN(5) > 0 { // one fragment all null
				r.i = new(int64(rng.IntN(8) + frag*3 - 8))
			}
			if frag != 5 && rng.IntN(5) > 0 {
				r.f = new(float64(rng.IntN(41)-20) / 4)
			}
			if frag != 5 && rng.IntN(5) > 0 {
				// Each fragment's strings start with its letter (so that
				// its minimum has a pattern's prefix), the empty string
				// in one.
				s := string("abc"[frag%3])
				if frag == 3 {
					s = "ab"
				}
				if frag == 4 && rng.IntN(4) == 0 {
					s = ""
				}
				for range rng.IntN(3) {
					s += string("abc"[rng.IntN(3)])
				}
				r.s = &s
			}
			if frag == 5 {
				r.i = nil
			}
			bld.Field(0).(*array.Int64Builder).Append(int64(len(rows)))
			appendOpt(bld.Field(1).(*array.Int64Builder), r.i)
			appendOpt(bld.Field(2).(*array.Float64Builder), r.f)
			if r.s == nil {
				bld.Field(3).AppendNull()
			} else {
				bld.Field(3).(*array.StringBuilder).Append(*r.s)
			}
			rows = append(rows, r)
		}
		rec := bld.NewRecordBatch()
		bld.Release()
		f, err := fragment.Write(ctx, b, schema, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		f.ID = uint64(frag)
		frags = append(frags, f)
	}
	counted := blob.NewCounted(b)
	snap := table.SnapshotOf(counted, schema, frags)
	requests := func(q expr.Predicate) (ids []int64, n int64) {
		before := counted.Stats()
		for rec, err := range snap.Scan(ctx, table.ScanOptions{Filter: q, Columns: []string{"id"}}) {
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
		}
		slices.Sort(ids)
		return ids, counted.Stats().Sub(before).Requests()
	}
	all, err := expr.ParseFilter("id >= 0")
	if err != nil {
		t.Fatal(err)
	}
	_, full := requests(all) // every fragment read
	pruned := 0
	for n := range 600 {
		e := genExpr(rng, 3)
		var want []int64
		for id, r := range rows {
			if e.eval(r) == tru {
				want = append(want, int64(id))
			}
		}
		p, err := expr.ParseFilter(e.text)
		if err != nil {
			t.Fatalf("filter %d %q: %v", n, e.text, err)
		}
		for _, text := range []string{e.text, p.String()} {
			q, err := expr.ParseFilter(text)
			if err != nil {
				t.Fatalf("%q prints %q, which does not parse: %v", e.text, text, err)
			}
			got, n := requests(q)
			if !slices.Equal(got, want) {
				t.Fatalf("filter %q selects ids %v; SQL selects %v", text, got, want)
			}
			if n < full {
				pruned++
			}
		}
	}
	if pruned == 0 {
		t.Fatal("no filter pruned a fragment: the statistics were not used")
	}
	t.Logf("600 filters, each as written and as printed; %d of 1200 scans made fewer requests than a full read (%d): fragments skipped by their statistics", pruned, full)
}

func appendOpt[T int64 | float64, B interface {
	Append(T)
	AppendNull()
}](b B, v *T) {
	if v == nil {
		b.AppendNull()
		return
	}
	b.Append(*v)
}

// NaN satisfies no comparison, as a null does, whether or not statistics
// prune (they leave NaN out of a column's bounds), and a count agrees
// with a scan; an unsigned value past int64 compares above every integer.
func TestNaNAndUnsignedCompareTheSameWithOrWithoutPruning(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64},
		{Name: "u", Type: arrow.PrimitiveTypes.Uint64},
		{Name: "i", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	nan, inf := math.NaN(), math.Inf(1)
	var frags []format.Fragment
	var all []arrow.RecordBatch
	id := int64(0)
	for _, fs := range [][]float64{{5, nan}, {nan}, {5, inf}} {
		bld := array.NewRecordBuilder(testenv.Arrow, schema)
		for _, f := range fs {
			id++
			bld.Field(0).(*array.Int64Builder).Append(id)
			bld.Field(1).(*array.Float64Builder).Append(f)
			bld.Field(2).(*array.Uint64Builder).Append(1 << 63)
			bld.Field(3).(*array.Int64Builder).Append(math.MaxInt64)
		}
		rec := bld.NewRecordBatch()
		bld.Release()
		f, err := fragment.Write(ctx, b, schema, rec)
		if err != nil {
			t.Fatal(err)
		}
		f.ID = uint64(len(frags))
		frags = append(frags, f)
		all = append(all, rec)
	}
	defer func() {
		for _, r := range all {
			r.Release()
		}
	}()
	snap := table.SnapshotOf(b, schema, frags)
	for filter, want := range map[string][]int64{
		"f < 0":           nil,
		"f + 0 < 0":       nil,
		"f != 5":          {5},
		"f NOT IN (5)":    {5},
		"f >= 5":          {1, 4, 5},
		"f = 5":           {1, 4},
		"NOT f < 10":      {5},
		"u > i":           {1, 2, 3, 4, 5},
		"u = i":           nil,
		"i < u AND u > 0": {1, 2, 3, 4, 5},
	} {
		p, err := expr.ParseFilter(filter)
		if err != nil {
			t.Fatal(err)
		}
		for _, pruned := range []bool{true, false} {
			var got []int64
			seq := table.ScanBatches(ctx, schema, all, table.ScanOptions{Filter: p, Columns: []string{"id"}})
			if pruned {
				seq = snap.Scan(ctx, table.ScanOptions{Filter: p, Columns: []string{"id"}})
			}
			for rec, err := range seq {
				if err != nil {
					t.Fatalf("%s: %v", filter, err)
				}
				got = append(got, rec.Column(0).(*array.Int64).Int64Values()...)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s (statistics pruning %v): ids %v, want %v", filter, pruned, got, want)
			}
		}
		bound, err := expr.Bind(p, schema)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := snap.Count(ctx, bound); err != nil || c.Rows != int64(len(want)) {
			t.Errorf("count of %s: %+v %v, want %d", filter, c, err, len(want))
		}
	}
}
