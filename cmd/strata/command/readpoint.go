package command

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
)

// readPoint is the version a verb reads: --version, --tag or --as-of (at
// most one; none: the latest).
type readPoint struct {
	version uint64
	tag     string
	asOf    string
	fs      *pflag.FlagSet
}

// flags declares --version, --tag and --as-of on fs; what says what the
// verb does with the version ("read", "count").
func (p *readPoint) flags(fs *pflag.FlagSet, what string) {
	p.fs = fs
	fs.Uint64Var(&p.version, "version", 0, "version to "+what+" (default: latest)")
	fs.StringVar(&p.tag, "tag", "", "tag of the version to "+what)
	fs.StringVar(&p.asOf, "as-of", "", "the version committed at or before this time: RFC 3339 (2026-12-07T10:00:00Z) or a duration ago (2h)")
}

// set tells whether a version other than the latest was asked for.
func (p *readPoint) set() bool { return p.version != 0 || p.tag != "" || p.asOf != "" }

// options is the point as table.Open takes it; a bad time or more than
// one of the flags is a usage error.
func (p *readPoint) options() (table.OpenOptions, error) {
	if p.fs != nil && p.fs.Changed("as-of") && strings.TrimSpace(p.asOf) == "" {
		return table.OpenOptions{}, usageError{errors.New("--as-of needs a time: RFC 3339 (2026-12-07T10:00:00Z) or a duration ago (2h)")}
	}
	if p.fs != nil && p.fs.Changed("tag") && p.tag == "" {
		return table.OpenOptions{}, usageError{errors.New("--tag needs a name")}
	}
	n := 0
	for _, given := range []bool{p.version != 0, p.tag != "", p.asOf != ""} {
		if given {
			n++
		}
	}
	if n > 1 {
		return table.OpenOptions{}, usageError{errors.New("give at most one of --version, --tag and --as-of")}
	}
	o := table.OpenOptions{Version: p.version, Tag: p.tag}
	if p.asOf != "" {
		at, err := table.ParseAsOf(p.asOf, time.Now())
		if err != nil {
			return o, usageError{fmt.Errorf("--as-of: %w", err)}
		}
		o.AsOf = at
	}
	return o, nil
}

// open opens the version the point names in b.
func (p *readPoint) open(ctx context.Context, b blob.Bucket) (*table.Snapshot, error) {
	o, err := p.options()
	if err != nil {
		return nil, err
	}
	return table.Open(ctx, b, &o)
}
