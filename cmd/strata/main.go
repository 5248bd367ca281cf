// Command strata manages Strata tables from a shell.
//
// It is a front that starts in a few milliseconds: it prints its version
// and its help itself, and runs every other verb by executing the program
// that carries it, with the same arguments, in its place (the same
// process, so signals, standard streams and the exit status are the
// verb's own):
//
//	strata-engine  the table verbs, on folders, S3 and memory (package command)
//	strata-full    every verb and store: serve, token, and gs:// URLs (package servecmd)
//
// Each is found beside strata (an install, the image), then on PATH; a
// verb strata-engine carries runs in strata-full when strata-engine is
// missing. Go runs every linked package's initialization whatever the
// verb, and the server's, the GCS client's and arrow's cost tens of
// milliseconds: split so, `strata version` and `strata --help` link none
// of them, and a table verb links neither the server nor GCS.
//
// Run from a checkout with `go run ./cmd/strata`, strata builds the
// program a verb needs from the same checkout (go build, into the user's
// cache directory) and runs it, so that `go run ./cmd/strata demo` runs
// the checkout's demo.
package main

import (
	_ "embed"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/stratadb/strata/internal/buildinfo"
)

// The programs that carry the verbs.
const (
	engineProgram = "strata-engine"
	fullProgram   = "strata-full"
)

// fullOnly are the verbs of strata-full that strata-engine lacks
// (servecmd.Verbs), and cobra's completion, which must see every verb.
var fullOnly = []string{"serve", "token", "completion"}

// help is `strata --help` as the whole strata command prints it
// (TestTheFrontsHelpIsTheCommands keeps it so).
//
//go:embed help.txt
var help string

func main() {
	os.Exit(front(os.Args, os.Stdout, os.Stderr))
}

// front runs strata with argv: it answers version and help, else runs the
// verb's program in its place (returning only when that fails).
func front(argv []string, stdout, stderr *os.File) int {
	args := argv[1:]
	switch {
	case len(args) == 1 && args[0] == "version":
		fmt.Fprintf(stdout, "strata %s\n", buildinfo.Get())
		return 0
	case len(args) == 0 || len(args) == 1 && (args[0] == "--help" || args[0] == "-h" || args[0] == "help"):
		fmt.Fprint(stdout, help)
		return 0
	}
	programs, why := route(args)
	path, err := find(programs, args)
	if err != nil {
		what := "this"
		if verb := verbOf(args); verb != "" {
			what = verb
		}
		fmt.Fprintf(stderr, "strata: %s runs %v%s\n", what, err, why)
		return 1
	}
	err = run(path, argv)
	fmt.Fprintf(stderr, "strata: running %s: %v\n", path, err)
	return 1
}

// route names the programs that carry what args ask for, the first
// preferred, and why when the verb alone does not say: strata-engine for
// its verbs (and their help), strata-full beside it standing in; strata-
// full alone for its own verbs, completion and any verb naming a gs://
// URL; strata-full for anything else — an unknown verb, flags before the
// verb — which it answers as the whole command, strata-engine standing in
// (it too says what is unknown).
func route(args []string) (programs []string, why string) {
	verb := verbOf(args)
	if verb == "help" && len(args) > 1 {
		verb = args[1]
	}
	switch {
	case slices.Contains(fullOnly, verb):
		return []string{fullProgram}, ""
	case !engineVerbs()[verb]:
		return []string{fullProgram, engineProgram}, ""
	}
	for _, a := range args {
		if strings.Contains(strings.ToLower(a), "gs://") {
			return []string{fullProgram}, " (for its gs:// URL: strata-full links the GCS driver)"
		}
	}
	return []string{engineProgram, fullProgram}, ""
}

// verbOf is the verb args name: the first argument, when it is not a flag.
func verbOf(args []string) string {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return ""
	}
	return args[0]
}

// engineVerbs are the verbs strata-engine carries: those the whole
// command's help lists, but fullOnly and help.
func engineVerbs() map[string]bool {
	verbs := map[string]bool{}
	_, list, _ := strings.Cut(help, "Available Commands:\n")
	for line := range strings.Lines(list) {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(line, "  ") {
			break
		}
		verbs[f[0]] = true
	}
	delete(verbs, "help")
	for _, v := range fullOnly {
		delete(verbs, v)
	}
	return verbs
}
