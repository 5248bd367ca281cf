package servecmd

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/blob"
	_ "github.com/stratadb/strata/blob/gcs"
	"github.com/stratadb/strata/cmd/strata/command"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/internal/cli"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// run runs the whole strata command, as strata-full does.
func run(t *testing.T, env *command.Env, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if env == nil {
		env = &command.Env{Open: blob.Open}
	}
	env.Out, env.Err = &out, &errOut
	code = command.RunRoot(args, env, NewRoot)
	return code, out.String(), errOut.String()
}

// serve opens its bucket before it listens: a URL it cannot use fails at
// start, naming the schemes it takes, instead of at the first request.
func TestServeRefusesABucketItCannotOpenBeforeListening(t *testing.T) {
	// Should serve get as far as listening, it fails there instead.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for bucket, says := range map[string]string{
		"ftp://x":      `unknown scheme "ftp"; want mem, file, s3 or gs`,
		"s3:/lake/t":   `lacks "//"`,
		"gs:///tables": "no bucket name",
	} {
		code, out, errOut := run(t, nil, "serve", "--bucket", bucket, "--listen", busy.Addr().String())
		if code != 2 || !strings.Contains(errOut, says) || strings.Contains(out, "listening") {
			t.Errorf("--bucket %s: exit %d, want 2 saying %q\n%s%s", bucket, code, says, out, errOut)
		}
	}
}

func TestServeRefusesAnOpenAddressWithoutAToken(t *testing.T) {
	t.Setenv("STRATA_TOKEN", "")
	code, _, errOut := run(t, nil, "serve", "--bucket", "file://"+t.TempDir(), "--listen", "0.0.0.0:0")
	if code != 2 || !strings.Contains(errOut, "no token configured") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code, _, _ := run(t, nil, "serve", "--listen", "127.0.0.1:0"); code != 2 {
		t.Fatalf("serve without --bucket: exit %d", code)
	}
}

// serve's numeric flags outside their range are usage errors (exit 2)
// naming the flag and the range, before it opens its bucket.
func TestServeFlagsOutsideTheirRangeAreUsageErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	// serve, should it get past its flags, fails to listen.
	serve := "serve --listen " + busy.Addr().String() + " --bucket mem://"
	for _, c := range []struct{ args, says string }{
		{serve + " --drain-timeout 0s", "--drain-timeout 0s: want at least 1ms"},
		{serve + " --shutdown-grace -1s", "--shutdown-grace -1s: want at least 0s"},
	} {
		env := &command.Env{Open: func(_ context.Context, u string) (blob.Bucket, error) {
			t.Errorf("%s: opened %s", c.args, u)
			return nil, errors.New("a refused command opened a bucket")
		}}
		code, out, errOut := run(t, env, strings.Fields(c.args)...)
		if code != 2 || !strings.Contains(errOut, c.says) || out != "" {
			t.Errorf("%s: exit %d, want 2 saying %q\n%s%s", c.args, code, c.says, out, errOut)
		}
	}
}

// Every numeric flag of every verb declares the values it takes (an
// integer or duration flag without a range fails here).
func TestEveryNumericFlagHasARange(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if free := cli.Unbounded(c.Flags()); len(free) > 0 {
			t.Errorf("%s: numeric flags without a range: %q", c.CommandPath(), free)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRoot(&command.Env{Open: blob.Open}))
}

// The README's table of verbs lists every verb the tool has.
func TestTheREADMEsVerbTableIsComplete(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	section = section[strings.Index(section, "## The command line"):]
	section = section[:strings.Index(section[3:], "\n## ")+3]
	for _, c := range NewRoot(&command.Env{}).Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		name := c.Name()
		if !strings.Contains(section, "`strata "+name+" ") && !strings.Contains(section, "`strata "+name+"`") &&
			!regexp.MustCompile("`strata [a-z|\\\\-]*\\b"+name+"\\b").MatchString(section) {
			t.Errorf("the README's verb table lacks strata %s", name)
		}
	}
}
