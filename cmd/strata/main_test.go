package main

import (
	"bytes"
	"flag"
	"os"
	"slices"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/cmd/strata/command"
	"github.com/stratadb/strata/cmd/strata/servecmd"
)

var update = flag.Bool("update", false, "write help.txt from the whole strata command's help")

// The front prints the whole strata command's help, word for word: a
// verb added, renamed or described anew changes help.txt here, or this
// fails. go test ./cmd/strata -run TestTheFrontsHelpIsTheCommands -update
// writes it.
func TestTheFrontsHelpIsTheCommands(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {}, {"help"}, {"-h"}} {
		var out, errOut bytes.Buffer
		if code := command.RunRoot(args, &command.Env{Out: &out, Err: &errOut, Open: blob.Open}, servecmd.NewRoot); code != 0 {
			t.Fatalf("strata %q: exit %d\n%s", args, code, errOut.String())
		}
		if *update {
			if err := os.WriteFile("help.txt", out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		if out.String() != help {
			t.Fatalf("strata %q prints\n%s\nthe front prints help.txt:\n%s\nrun go test ./cmd/strata -run TestTheFrontsHelpIsTheCommands -update", args, out.String(), help)
		}
	}
}

// Each verb goes to the program that carries it: serve, token and
// completion (and their help) to strata-full, so does any verb naming a
// gs:// URL; the others to strata-engine.
func TestTheFrontRoutesEachVerb(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"scan", "./t"}, engineProgram},
		{[]string{"scan", "--help"}, engineProgram},
		{[]string{"help", "scan"}, engineProgram},
		{[]string{"version", "--help"}, engineProgram},
		{[]string{"no-such-verb"}, engineProgram},
		{[]string{"serve", "--bucket", "file://./t"}, fullProgram},
		{[]string{"help", "serve"}, fullProgram},
		{[]string{"--help", "serve"}, fullProgram},
		{[]string{"token", "new", "--name", "n"}, fullProgram},
		{[]string{"completion", "bash"}, fullProgram},
		{[]string{"scan", "gs://lake/t"}, fullProgram},
		{[]string{"copy", "./t", "gs://lake/t"}, fullProgram},
		{[]string{"serve", "--bucket=gs://lake"}, fullProgram},
	} {
		if got := route(c.args); got != c.want {
			t.Errorf("strata %q goes to %s, want %s", c.args, got, c.want)
		}
	}
}

// The verbs the front sends to strata-full are those servecmd adds, and
// cobra's completion.
func TestTheFrontKnowsServecmdsVerbs(t *testing.T) {
	want := append(slices.Clone(servecmd.Verbs), "completion")
	if !slices.Equal(fullVerbs, want) {
		t.Fatalf("the front sends %q to strata-full; servecmd's verbs and completion are %q", fullVerbs, want)
	}
}

// go run builds into go-build…/b001/exe/strata, and runs its copy in the
// build cache after; an installed strata, or one built with go build, is
// neither.
func TestBuiltByGoRun(t *testing.T) {
	for path, want := range map[string]bool{
		"/tmp/go-build3142/b001/exe/strata":                       true,
		"/home/me/.cache/go-build-tmp/go-build77/b001/exe/strata": true,
		"/usr/local/bin/strata":                                   false,
		"/home/me/go/bin/strata":                                  false,
		"/tmp/go-build3142/b001/strata":                           false,
		"/srv/exe/strata":                                         false,
	} {
		if got := builtByGoRun(path); got != want {
			t.Errorf("builtByGoRun(%s) = %v, want %v", path, got, want)
		}
	}
}
