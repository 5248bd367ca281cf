package table_test

import (
	"errors"
	"testing"

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
