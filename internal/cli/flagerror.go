package cli

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/pflag"
)

// invalidFlag matches the error a flag set gives for a value its flag's
// type does not parse (the words after it are the parser's own).
var invalidFlag = regexp.MustCompile(`^invalid argument "(.*)" for "(?:-\w, )?--([\w-]+)" flag: (.*)$`)

// FlagValueError is err said in the tool's words when it is a flag's
// value that does not parse: the flag, the value, and what the flag takes
// — not the parser's ("strconv.ParseUint: parsing …"). Other errors pass.
func FlagValueError(fs *pflag.FlagSet, err error) error {
	m := invalidFlag.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	f := fs.Lookup(m[2])
	if f == nil {
		return err
	}
	want := ""
	switch t := f.Value.Type(); {
	case strings.HasPrefix(t, "uint"):
		want = "a whole number from 0 up, such as 3"
	case strings.HasPrefix(t, "int"):
		want = "a whole number, such as 3"
	case strings.HasPrefix(t, "float"):
		want = "a number, such as 0.5"
	case t == "duration":
		want = "a duration, such as 90s, 15m, 2h or 1h30m"
	case t == "bool":
		want = "true or false"
	default:
		return err
	}
	if strings.Contains(m[3], "out of range") {
		return fmt.Errorf("--%s %q: out of range; want %s", m[2], m[1], want)
	}
	return fmt.Errorf("--%s %q: want %s", m[2], m[1], want)
}
