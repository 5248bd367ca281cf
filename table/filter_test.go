package table_test

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/internal/rollouts"
	"github.com/stratadb/strata/table"
)

func TestParseFilter(t *testing.T) {
	good := map[string]string{
		"reward >= 0.9":                      "reward >= 0.9",
		"worker = 'w03' AND step < 10":       `worker = "w03" AND step < 10`,
		`id IN (1, 2,3) and worker != "w01"`: `id IN (1, 2, 3) AND worker != "w01"`,
		"id == -5":                           "id = -5",
		"x > 1e3":                            "x > 1000",
		"ok = true":                          "ok = true",
	}
	for in, want := range good {
		p, err := table.ParseFilter(in)
		if err != nil {
			t.Errorf("ParseFilter(%q): %v", in, err)
			continue
		}
		if p.String() != want {
			t.Errorf("ParseFilter(%q) = %s, want %s", in, p, want)
		}
	}
	for _, bad := range []string{"", "reward", "reward >=", "reward ! 3", "id IN (1, 2", "a = 'x", "a = 1 OR b = 2", "= 3", "a = @"} {
		if _, err := table.ParseFilter(bad); !errors.Is(err, table.ErrBadPredicate) {
			t.Errorf("ParseFilter(%q) = %v, want ErrBadPredicate", bad, err)
		}
	}
}

// FuzzParseFilter: any text parses, or fails with ErrBadPredicate; what
// parses prints back to a filter that parses to the same predicate, binds
// to a schema or fails with ErrBadPredicate, and evaluates on rows without
// a panic, keeping only rows it matches.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"reward >= 0.9", "worker = 'w03' AND step < 10", `id IN (1, 2,3) and worker != "w01"`,
		"x > 1e3", "ok = true", "a = 'x", "id IN ()", "step != -0", "reward < 1e309"} {
		f.Add(s)
	}
	rec := rollouts.Batch(nil, 42, 3, 0, 64)
	defer rec.Release()
	f.Fuzz(func(t *testing.T, s string) {
		p, err := table.ParseFilter(s)
		if err != nil {
			if !errors.Is(err, table.ErrBadPredicate) {
				t.Fatalf("ParseFilter(%q): untyped error %v", s, err)
			}
			return
		}
		again, err := table.ParseFilter(p.String())
		if err != nil || again.String() != p.String() {
			t.Fatalf("ParseFilter(%q) prints %q, which parses to %v, %v", s, p, again, err)
		}
		if _, err := table.Bind(p, rollouts.Schema); err != nil {
			if !errors.Is(err, table.ErrBadPredicate) {
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
