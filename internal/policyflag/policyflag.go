// Package policyflag defines the compaction policy's flags, the same in
// every program that compacts or says whether compaction is due
// (strata-compactor, strata serve, strata compact): the same names, the
// same defaults, the same bounds, and so the same STRATA_* environment
// variables (STRATA_MIN_FRAGMENTS, STRATA_QUIET_WINDOWS, …). A server
// and the Job given one environment follow one policy.
package policyflag

import (
	"github.com/spf13/pflag"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/cli"
)

// Names are the flags Define may define, for reading them from the
// environment (cli.BindEnv).
var Names = []string{"min-fragments", "quiet-windows", "target-rows", "target-bytes", "max-source-fragments"}

// Flags hold what the policy's flags were given.
type Flags struct {
	p       engine.Policy
	windows []string
}

// Define defines on fs the flags of what a compaction writes
// (--target-rows, --target-bytes, --max-source-fragments) and, with
// schedule, of when one is due (--min-fragments, --quiet-windows). Each
// numeric flag is at least 1 (cli.Bound).
func Define(fs *pflag.FlagSet, schedule bool) *Flags {
	f := &Flags{}
	if schedule {
		fs.IntVar(&f.p.MinFragments, "min-fragments", 16, "compaction is due once a table has this many small fragments")
		fs.StringSliceVar(&f.windows, "quiet-windows", nil, "UTC hour windows with no compaction, e.g. 22-6 (repeatable, or comma-separated)")
		cli.Bound(fs, "min-fragments", 1, cli.Unlimited)
	}
	fs.Int64Var(&f.p.TargetRows, "target-rows", 1_000_000, "rows per output fragment at most")
	fs.Int64Var(&f.p.TargetBytes, "target-bytes", 512<<20, "bytes per output fragment at most")
	fs.IntVar(&f.p.MaxSourceFragments, "max-source-fragments", 1024, "source fragments per compaction at most")
	for _, n := range []string{"target-rows", "target-bytes", "max-source-fragments"} {
		cli.Bound(fs, n, 1, cli.Unlimited)
	}
	return f
}

// Policy is the policy the flags give; an error names a quiet window that
// does not parse.
func (f *Flags) Policy() (engine.Policy, error) {
	p := f.p
	p.QuietWindows = nil
	for _, w := range f.windows {
		win, err := engine.ParseWindow(w)
		if err != nil {
			return engine.Policy{}, err
		}
		p.QuietWindows = append(p.QuietWindows, win)
	}
	return p, nil
}
