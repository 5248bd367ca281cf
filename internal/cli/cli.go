// Package cli is what Strata's two command-line tools (strata and
// strata-compactor) share: one flag library (cobra and pflag), one way
// to read flags from the environment, and one way to bound numeric flags
// (Bound, CheckBounds).
//
// A flag --some-name is read from STRATA_SOME_NAME when the command line
// does not give it: the command line always wins, for repeatable flags too
// (the environment's value is not added to the command line's).
package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// EnvName is the environment variable of a flag.
func EnvName(flag string) string {
	return "STRATA_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// BindEnv sets each flag of fs that the command line left unset from its
// environment variable, found in environ ("KEY=value" strings, as
// os.Environ returns). With names, only those flags are read from the
// environment; without, every flag is. Call it after parsing.
func BindEnv(fs *pflag.FlagSet, environ []string, names ...string) error {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || (len(names) > 0 && !slices.Contains(names, f.Name)) {
			return
		}
		name := EnvName(f.Name)
		if v, ok := env[name]; ok {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, serr)
			}
		}
	})
	return err
}

// Prepare is what both tools do before a command runs, in their
// PersistentPreRunE: set each flag of fs the command line left unset from
// its environment variable (BindEnv, environ and names as there), then
// check every numeric flag against its bounds (CheckBounds). An error is
// a usage error: the tools exit 2 on it.
func Prepare(fs *pflag.FlagSet, environ []string, names ...string) error {
	if err := BindEnv(fs, environ, names...); err != nil {
		return err
	}
	return CheckBounds(fs)
}

// IsCobraUsage recognises cobra's own argument errors ("unknown command",
// "unknown flag", a wrong number of arguments), which carry no type: both
// tools exit 2 on them, as on their own usage errors.
func IsCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts 0 arg"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
