package table_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/expr"
)

func TestParseFilter(t *testing.T) {
	good := map[string]string{
		"reward >= 0.9":                      "reward >= 0.9",
		"worker = 'w03' AND step < 10":       `worker = "w03" AND step < 10`,
		`id IN (1, 2,3) and worker != "w01"`: `id IN (1, 2, 3) AND worker != "w01"`,
		"id == -5":                           "id = -5",
		"x > 1e3":                            "x > 1000.0",
		"ok = true":                          "ok = true",
		// Names that are not plain words, between backticks.
		"`a.b` = 1 AND `x y` IN (2)": "`a.b` = 1 AND `x y` IN (2)",
		"`it``s` != 'x'":             "`it``s` != \"x\"",
		"`plain` < 3":                "plain < 3",
		"`1st` = 1":                  "`1st` = 1",
		"café = 'crème' AND 日本 >= 2": `café = "crème" AND 日本 >= 2`,
		// OR, NOT, parentheses and the other comparisons.
		"a = 1 OR b = 2":                     "(a = 1 OR b = 2)",
		"a = 1 AND b = 2 OR c = 3":           "(a = 1 AND b = 2 OR c = 3)",
		"a = 1 AND (b = 2 OR c = 3)":         "a = 1 AND (b = 2 OR c = 3)",
		"not a = 1":                          "NOT (a = 1)",
		"NOT (a = 1 OR b IS NULL)":           "NOT ((a = 1 OR b IS NULL))",
		"a IS NOT NULL AND b is null":        "a IS NOT NULL AND b IS NULL",
		"a NOT IN (1, 2)":                    "a NOT IN (1, 2)",
		"w LIKE 'ab%' OR w NOT LIKE '_x\\%'": `(w LIKE "ab%" OR w NOT LIKE "_x\\%")`,
		"a BETWEEN 1 AND 5 AND b = 2":        "a >= 1 AND a <= 5 AND b = 2",
		"a NOT BETWEEN 1 AND 5":              "NOT (a >= 1 AND a <= 5)",
		"a <> 3":                             "a != 3",
		"`not` = 1 AND `OR` = 2":             "`not` = 1 AND `OR` = 2",
		"((a = 1))":                          "a = 1",
		// Arithmetic, and columns compared with each other.
		"a = `b`":                "a = b",
		"a + 1 > b * 2":          "(a + 1) > (b * 2)",
		"(a + 1) * 2 <= 10 - -c": "((a + 1) * 2) <= (10 - -(c))",
		"reward / 2 >= -0.5":     "(reward / 2) >= -0.5",
		"5 < a":                  "a > 5",
		"-a < 3 OR a % 3 = 1":    "(-(a) < 3 OR (a % 3) = 1)",
		"id == -5 AND (a) = 1":   "id = -5 AND a = 1",
	}
	for in, want := range good {
		p, err := expr.ParseFilter(in)
		if err != nil {
			t.Errorf("ParseFilter(%q): %v", in, err)
			continue
		}
		if p.String() != want {
			t.Errorf("ParseFilter(%q) = %s, want %s", in, p, want)
		}
	}
	for _, bad := range []string{"", "reward", "reward >=", "reward ! 3", "id IN (1, 2", "a = 'x", "a = 1 OR", "= 3", "a = @",
		"(a = 1", "a = 1)", "NOT", "a IS 3", "a NOT = 1", "a = NULL", "a LIKE 3", "a LIKE 'x\\'", "a BETWEEN 1", "a BETWEEN 1 OR 2", "not = 1", "a = 1 b = 2",
		"`a = 1", "`` = 1", "a + = 1", "(a + 1", "a * 'x' = 1 AND", "- = 1", "\xff = 1", "a = 1 `AND` b = 2"} {
		if _, err := expr.ParseFilter(bad); !errors.Is(err, expr.ErrBadPredicate) {
			t.Errorf("ParseFilter(%q) = %v, want ErrBadPredicate", bad, err)
		}
	}
}

// Columns whose names are not plain words are filtered by their names
// between backticks, and only they are.
func TestFilterOnAnyColumnName(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "a.b", Type: arrow.PrimitiveTypes.Int64},
		{Name: "a", Type: arrow.StructOf(arrow.Field{Name: "b", Type: arrow.PrimitiveTypes.Int64})},
		{Name: "café", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{7, 8, 9}, nil)
	sb := b.Field(1).(*array.StructBuilder)
	for _, v := range []int64{9, 8, 7} {
		sb.Append(true)
		sb.FieldBuilder(0).(*array.Int64Builder).Append(v)
	}
	b.Field(2).(*array.StringBuilder).AppendValues([]string{"x", "y", "x"}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	p, err := expr.ParseFilter("`a.b` >= 8 AND café = 'x'")
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for out, err := range table.ScanBatches(ctx, schema, []arrow.RecordBatch{rec}, table.ScanOptions{Filter: p}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out.Column(0).(*array.Int64).Int64Values()...)
	}
	if len(got) != 1 || got[0] != 9 {
		t.Fatalf("`a.b` >= 8 AND café = 'x' kept a.b = %v, want [9]", got)
	}
}

func TestParseColumns(t *testing.T) {
	good := map[string][]string{
		"id":                    {"id"},
		"id, reward ,worker":    {"id", "reward", "worker"},
		"`a,b`, `x y` ,`it``s`": {"a,b", "x y", "it`s"},
		"café,`1st`":            {"café", "1st"},
		"a.b,c":                 {"a.b", "c"},
	}
	for in, want := range good {
		got, err := expr.ParseColumns(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseColumns(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a,", ",a", "a,,b", "`a", "`a`b", " , "} {
		if got, err := expr.ParseColumns(bad); !errors.Is(err, expr.ErrBadColumns) {
			t.Errorf("ParseColumns(%q) = %q, %v; want ErrBadColumns", bad, got, err)
		}
	}
}

// What clients send as columns= (api.ColumnList) reads back as the same
// names, and quotes a name as a filter would.
func TestColumnListReadsBack(t *testing.T) {
	names := []string{"id", "a,b", " lead", "trail ", "`tick", "it`s", "x y", "a.b", "café", "1st", ",", "`,`"}
	got, err := expr.ParseColumns(api.ColumnList(names))
	if err != nil || !slices.Equal(got, names) {
		t.Fatalf("ParseColumns(%q) = %q, %v; want %q", api.ColumnList(names), got, err, names)
	}
	for _, n := range names {
		if q := api.ColumnList([]string{n}); q != expr.QuoteColumn(n) {
			t.Errorf("%q: ColumnList writes %s, QuoteColumn %s", n, q, expr.QuoteColumn(n))
		}
	}
}

// FuzzParseFilter: any text parses, or fails with ErrBadPredicate; what
// parses prints back to a filter that parses to the same predicate, binds
// to a schema or fails with ErrBadPredicate, and evaluates on rows without
// a panic, keeping only rows it matches.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"reward >= 0.9", "worker = 'w03' AND step < 10", `id IN (1, 2,3) and worker != "w01"`,
		"x > 1e3", "ok = true", "a = 'x", "id IN ()", "step != -0", "reward < 1e309", "`a.b` = 1", "`it``s` IN (1)", "café = 'é'",
		"NOT (id < 3 OR worker IS NULL)", "worker LIKE 'w0%' AND step NOT BETWEEN 2 AND 5", "id NOT IN (1, 2) OR reward <> 0.5", "((id = 1))"} {
		f.Add(s)
	}
	rec := rollouts.Batch(nil, 42, 3, 0, 64)
	defer rec.Release()
	f.Fuzz(func(t *testing.T, s string) {
		p, err := expr.ParseFilter(s)
		if err != nil {
			if !errors.Is(err, expr.ErrBadPredicate) {
				t.Fatalf("ParseFilter(%q): untyped error %v", s, err)
			}
			return
		}
		again, err := expr.ParseFilter(p.String())
		if err != nil || again.String() != p.String() {
			t.Fatalf("ParseFilter(%q) prints %q, which parses to %v, %v", s, p, again, err)
		}
		if _, err := expr.Bind(p, rollouts.Schema); err != nil {
			if !errors.Is(err, expr.ErrBadPredicate) {
				t.Fatalf("Bind(%q): untyped error %v", s, err)
			}
			return
		}
		all := 0
		for out, err := range table.ScanBatches(ctx, rollouts.Schema, []arrow.RecordBatch{rec}, table.ScanOptions{Filter: p}) {
			if err != nil {
				t.Fatalf("filter %q: %v", s, err)
			}
			all += int(out.NumRows())
		}
		if all > int(rec.NumRows()) {
			t.Fatalf("filter %q kept %d of %d rows", s, all, rec.NumRows())
		}
	})
}

// A filter nested past 200 levels (parentheses, NOTs, minus signs, the
// operators of one value) is refused at once, not parsed at a cost that
// grows with its square; one within the bound parses.
func TestDeepFiltersAreRefusedQuickly(t *testing.T) {
	for _, c := range []struct {
		filter string
		ok     bool
	}{
		{strings.Repeat("(", 150) + "a" + strings.Repeat(")", 150) + " = 1", true},
		{strings.Repeat("(", 100000) + "a" + strings.Repeat(")", 100000) + " = 1", false},
		{strings.Repeat("NOT ", 100000) + "a = 1", false},
		{"a = 1" + strings.Repeat(" + 1", 100000), false},
		{strings.Repeat("-", 100000) + "1 = a", false},
		{"a IN (" + strings.Repeat("1, ", 100000) + "1)", true},
	} {
		_, err := expr.ParseFilter(c.filter)
		if (err == nil) != c.ok || err != nil && !errors.Is(err, expr.ErrBadPredicate) {
			t.Errorf("a filter of %d bytes: %.200v (want ok %v)", len(c.filter), err, c.ok)
		}
	}
}
