package main

import (
	"bytes"
	"flag"
	"os"
	"slices"
	"testing"

	"github.com/spf13/cobra"

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

// Each verb goes to the program that carries it: strata-engine's verbs
// (and their help) to it, unless an argument is a gs:// URL in any case;
// serve, token, completion (and cobra's __complete), an unknown or empty
// verb, and flags before the verb to strata-full, which answers them as
// the whole command does.
func TestTheFrontRoutesEachVerb(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"scan", "./t"}, engineProgram},
		{[]string{"scan", "--help"}, engineProgram},
		{[]string{"scan", "--limit=1", "./t"}, engineProgram},
		{[]string{"help", "scan"}, engineProgram},
		{[]string{"version", "--help"}, engineProgram},
		{[]string{"scan", "./serve"}, engineProgram},
		{[]string{"no-such-verb"}, fullProgram},
		{[]string{"serv"}, fullProgram},
		{[]string{""}, fullProgram},
		{[]string{"help", "no-such-verb"}, fullProgram},
		{[]string{"-h", "-h"}, fullProgram},
		{[]string{"--help", "scan"}, fullProgram},
		{[]string{"--", "scan", "t"}, fullProgram},
		{[]string{"--format", "jsonl", "serve"}, fullProgram},
		{[]string{"serve", "--bucket", "file://./t"}, fullProgram},
		{[]string{"help", "serve"}, fullProgram},
		{[]string{"token", "new", "--name", "n"}, fullProgram},
		{[]string{"completion", "bash"}, fullProgram},
		{[]string{"__complete", ""}, fullProgram},
		{[]string{"__completeNoDesc", "serve", "--b"}, fullProgram},
		{[]string{"scan", "gs://lake/t"}, fullProgram},
		{[]string{"scan", "GS://lake/t"}, fullProgram},
		{[]string{"copy", "./t", "gs://lake/t"}, fullProgram},
	} {
		if got, _ := route(c.args); got[0] != c.want {
			t.Errorf("strata %q goes to %s, want %s", c.args, got, c.want)
		}
	}
}

// The verbs the front sends to strata-engine are exactly package
// command's (help and completion aside); strata-full's, servecmd's.
func TestTheFrontKnowsEachProgramsVerbs(t *testing.T) {
	names := func(c *cobra.Command) []string {
		var out []string
		for _, sub := range c.Commands() {
			if n := sub.Name(); n != "help" && n != "completion" {
				out = append(out, n)
			}
		}
		slices.Sort(out)
		return out
	}
	var engine []string
	for v := range engineVerbs() {
		engine = append(engine, v)
	}
	slices.Sort(engine)
	if want := names(command.NewRoot(&command.Env{})); !slices.Equal(engine, want) {
		t.Errorf("the front sends %q to strata-engine, which carries %q", engine, want)
	}
	full := append(slices.Clone(engine), fullOnly[:len(fullOnly)-1]...) // completion aside
	slices.Sort(full)
	if want := names(servecmd.NewRoot(&command.Env{})); !slices.Equal(full, want) {
		t.Errorf("the front knows %q of strata-full, which carries %q", full, want)
	}
	if fullOnly[len(fullOnly)-1] != "completion" || !slices.Equal(fullOnly[:len(fullOnly)-1], servecmd.Verbs) {
		t.Errorf("fullOnly %q: want servecmd.Verbs %q and completion", fullOnly, servecmd.Verbs)
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
