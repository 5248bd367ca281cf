package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/stratadb/strata/internal/cli"
)

// A flag's value that does not parse is said in the tool's words: the
// flag, the value, and what it takes; never the parser's.
func TestAFlagValueThatDoesNotParseIsSaidPlainly(t *testing.T) {
	for args, want := range map[string]string{
		"--version abc":                `--version "abc": want a whole number from 0 up`,
		"--limit 1.5":                  `--limit "1.5": want a whole number`,
		"--limit 99999999999999999999": `--limit "99999999999999999999": out of range`,
		"--retain soon":                `--retain "soon": want a duration`,
		"--ratio x":                    `--ratio "x": want a number`,
		"--fresh=maybe":                `--fresh "maybe": want true or false`,
	} {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		fs.Uint64("version", 0, "")
		fs.Int("limit", 0, "")
		fs.Duration("retain", time.Hour, "")
		fs.Float64("ratio", 0, "")
		fs.Bool("fresh", false, "")
		err := fs.Parse(strings.Fields(args))
		if err == nil {
			t.Fatalf("%s parsed", args)
		}
		got := cli.FlagValueError(fs, err).Error()
		if !strings.Contains(got, want) || strings.Contains(got, "strconv") || strings.Contains(got, "time:") {
			t.Errorf("%s: %q, want %q", args, got, want)
		}
	}
}
