package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stratadb/strata/harness/testenv"
)

// This machine has no Docker engine, so docker-compose.yml cannot run here.
// It stays correct by this test: every strata or strata-compactor command
// it runs names a verb and flags that the binaries' own --help lists.
func TestComposeCommandsMatchTheBinaries(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// Each service's command is a one-line JSON-style list; the
	// compactor's binary comes from its entrypoint.
	lists := regexp.MustCompile(`(?m)^\s+(command|entrypoint): \[(.*)\]\s*$`)
	var checked int
	entry := ""
	for _, m := range lists.FindAllStringSubmatch(string(data), -1) {
		var args []string
		for _, a := range strings.Split(m[2], ",") {
			args = append(args, strings.Trim(strings.TrimSpace(a), `"`))
		}
		if m[1] == "entrypoint" {
			entry = args[0]
			continue
		}
		bin := "strata"
		if strings.HasSuffix(entry, "strata-compactor") {
			bin = "strata-compactor"
		}
		entry = ""
		if args[0] == "server" && bin == "strata" && len(args) > 1 && args[1] == "/data" {
			continue // MinIO's own command
		}
		helpArgs := []string{"--help"}
		if bin == "strata" {
			helpArgs = []string{args[0], "--help"}
		}
		out, err := exec.Command(filepath.Join(bins, bin), helpArgs...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", bin, helpArgs, err, out)
		}
		if bin == "strata" && !strings.Contains(string(out), "strata "+args[0]) {
			t.Fatalf("compose runs `strata %s`, which its help does not know:\n%s", args[0], out)
		}
		for _, a := range args {
			if !strings.HasPrefix(a, "--") {
				continue
			}
			flag := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")
			// A flag's own line in the help: "  -name type" or "      --name type".
			if !regexp.MustCompile(`(?m)^\s+(-\w, )?--?` + regexp.QuoteMeta(flag) + `(\s|$)`).MatchString(string(out)) {
				t.Fatalf("compose passes %s to %s %s, which its --help does not list", flag, bin, args[0])
			}
		}
		checked++
	}
	if checked < 6 { // four workers, the server, the compactor
		t.Fatalf("checked %d commands; the compose file has more", checked)
	}
	t.Logf("checked %d commands of docker-compose.yml against the binaries' --help", checked)
}
