package cli

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// Every numeric flag (an integer or a duration) of both tools declares the
// values it takes with Bound, and a value outside them is a usage error
// before the command runs (CheckBounds): a count of -5 must not pass for
// "none", or a racer count for one that runs the machine out of memory.
// Unbounded lists the numeric flags that declare nothing, so that a test
// of each tool can hold every flag to it.

// rangeKey is the annotation under which Bound keeps a flag's range.
const rangeKey = "strata_range"

// Unlimited is the upper end of a range without one.
const Unlimited = math.MaxInt64

// Bound declares that the numeric flag name of fs takes values from lo to
// hi, both included (a duration flag's in nanoseconds: pass
// time.Duration values). It panics when fs has no such flag: a mistake in
// the program, not in its input.
func Bound(fs *pflag.FlagSet, name string, lo, hi int64) {
	if err := fs.SetAnnotation(name, rangeKey, []string{strconv.FormatInt(lo, 10), strconv.FormatInt(hi, 10)}); err != nil {
		panic(err)
	}
}

// CheckBounds returns an error naming the first flag of fs whose value
// lies outside the range Bound declared for it, and the range.
func CheckBounds(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		r, ok := f.Annotations[rangeKey]
		if err != nil || !ok || len(r) != 2 {
			return
		}
		lo, _ := strconv.ParseInt(r[0], 10, 64)
		hi, _ := strconv.ParseInt(r[1], 10, 64)
		side, known := compare(f, lo, hi)
		if !known || side == 0 {
			return
		}
		show := strconv.FormatInt
		if f.Value.Type() == "duration" {
			show = func(v int64, _ int) string { return time.Duration(v).String() }
		}
		want := show(lo, 10) + " to " + show(hi, 10)
		switch {
		case side < 0 && hi == Unlimited:
			want = "at least " + show(lo, 10)
		case side > 0 && hi == Unlimited:
			want = "at most " + show(hi, 10)
		}
		err = fmt.Errorf("--%s %s: want %s", f.Name, f.Value, want)
	})
	return err
}

// compare places f's value against [lo, hi]: -1 below, 0 within, 1 above;
// known is false for a flag that is not numeric.
func compare(f *pflag.Flag, lo, hi int64) (side int, known bool) {
	var v int64
	s := f.Value.String()
	switch f.Value.Type() {
	case "duration":
		d, err := time.ParseDuration(s)
		if err != nil {
			return 1, true
		}
		v = int64(d)
	case "uint", "uint8", "uint16", "uint32", "uint64":
		u, err := strconv.ParseUint(s, 10, 64)
		if err != nil || u > math.MaxInt64 {
			return 1, true
		}
		v = int64(u)
	case "int", "int8", "int16", "int32", "int64":
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 1, true
		}
		v = n
	default:
		return 0, false
	}
	switch {
	case v < lo:
		return -1, true
	case v > hi:
		return 1, true
	}
	return 0, true
}

// Unbounded returns the names of the numeric flags of fs for which Bound
// declared no range.
func Unbounded(fs *pflag.FlagSet) []string {
	var out []string
	fs.VisitAll(func(f *pflag.Flag) {
		if _, known := compare(f, 0, 0); known {
			if _, ok := f.Annotations[rangeKey]; !ok {
				out = append(out, f.Name)
			}
		}
	})
	return out
}
