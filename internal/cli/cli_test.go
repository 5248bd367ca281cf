package cli

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"
)

// The command line wins over the environment, for a repeatable flag too;
// an unset flag takes the environment's value; a bad value is an error
// naming the variable.
func TestFlagsWinOverTheEnvironment(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	tables := fs.StringSlice("table", nil, "")
	minFrags := fs.Int("min-fragments", 16, "")
	once := fs.Bool("once", false, "")
	if err := fs.Parse([]string{"--table", "a"}); err != nil {
		t.Fatal(err)
	}
	env := []string{"STRATA_TABLE=b,c", "STRATA_MIN_FRAGMENTS=3", "STRATA_ONCE=true", "OTHER=x"}
	if err := BindEnv(fs, env); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(*tables, []string{"a"}) || *minFrags != 3 || !*once {
		t.Fatalf("table %v, min-fragments %d, once %v", *tables, *minFrags, *once)
	}
	fs2 := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs2.Int("min-fragments", 16, "")
	fs2.Bool("once", false, "")
	if err := BindEnv(fs2, []string{"STRATA_MIN_FRAGMENTS=many"}); err == nil {
		t.Fatal("a bad value was taken")
	}
	if err := BindEnv(fs2, []string{"STRATA_ONCE=true"}, "min-fragments"); err != nil || fs2.Lookup("once").Changed {
		t.Fatalf("a flag not named was bound: %v", err)
	}
}
