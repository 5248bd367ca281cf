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
	"strings"

	"github.com/stratadb/strata/internal/buildinfo"
)

// The programs that carry the verbs.
const (
	engineProgram = "strata-engine"
	fullProgram   = "strata-full"
)

// fullVerbs are the verbs only strata-full carries (servecmd.Verbs), and
// cobra's completion, which must see every verb.
var fullVerbs = []string{"serve", "token", "completion"}

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
	path, err := find(route(args))
	if err != nil {
		fmt.Fprintf(stderr, "strata: %s %v\n", verbOf(args), err)
		return 1
	}
	err = run(path, argv)
	fmt.Fprintf(stderr, "strata: running %s: %v\n", path, err)
	return 1
}

// route names the program that carries the verb args ask for.
func route(args []string) string {
	verb := verbOf(args)
	if verb == "help" && len(args) > 1 {
		verb = args[1]
	}
	for _, v := range fullVerbs {
		if verb == v {
			return fullProgram
		}
	}
	for _, a := range args {
		if strings.Contains(a, "gs://") {
			return fullProgram
		}
	}
	return engineProgram
}

// verbOf is the first argument that is not a flag, as cobra finds the
// verb (the root takes no flags of its own but --help).
func verbOf(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}
