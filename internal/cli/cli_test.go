package cli

import (
	"slices"
	"strings"
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

// A numeric flag outside its declared range is refused, naming the flag,
// its value and the range; within it, and at its ends, it passes. A flag
// without a range is listed by Unbounded.
func TestBoundsOfNumericFlags(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.Int("rows", 100, "")
	fs.Uint64("version", 0, "")
	fs.Duration("every", 0, "")
	fs.Int("racers", 16, "")
	fs.Int("free", 0, "")
	fs.String("name", "", "")
	Bound(fs, "rows", 1, Unlimited)
	Bound(fs, "version", 0, Unlimited)
	Bound(fs, "every", 0, Unlimited)
	Bound(fs, "racers", 1, 256)
	if got := Unbounded(fs); !slices.Equal(got, []string{"free"}) {
		t.Fatalf("Unbounded = %q, want [free]", got)
	}
	for args, want := range map[string]string{
		"--rows=-5":                       "--rows -5: want at least 1",
		"--rows=0":                        "--rows 0: want at least 1",
		"--racers=100000":                 "--racers 100000: want 1 to 256",
		"--every=-1s":                     "--every -1s: want at least 0s",
		"--version=18446744073709551615":  "--version 18446744073709551615: want at most 9223372036854775807",
		"--rows=1 --racers=256 --every=0": "",
	} {
		fs.VisitAll(func(f *pflag.Flag) { _ = f.Value.Set(f.DefValue) })
		if err := fs.Parse(strings.Fields(args)); err != nil {
			t.Fatal(err)
		}
		err := CheckBounds(fs)
		if (want == "") != (err == nil) || err != nil && err.Error() != want {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}

// Prepare reads the environment, then checks the bounds: a value from the
// environment out of its range is refused as one from the command line
// would be, naming the flag; names limit what is read.
func TestPrepareBindsThenChecksBounds(t *testing.T) {
	newFS := func() *pflag.FlagSet {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.Int("min-fragments", 16, "")
		fs.String("table", "", "")
		Bound(fs, "min-fragments", 1, Unlimited)
		return fs
	}
	fs := newFS()
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	err := Prepare(fs, []string{"STRATA_MIN_FRAGMENTS=-5", "STRATA_TABLE=mem://"})
	if err == nil || !strings.Contains(err.Error(), "--min-fragments -5") {
		t.Fatalf("an out-of-range value from the environment: %v", err)
	}
	fs = newFS()
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := Prepare(fs, []string{"STRATA_MIN_FRAGMENTS=-5", "STRATA_TABLE=mem://"}, "table"); err != nil {
		t.Fatalf("with names, only those flags are read: %v", err)
	}
	if v, _ := fs.GetString("table"); v != "mem://" {
		t.Errorf("table %q, want it from the environment", v)
	}
}
