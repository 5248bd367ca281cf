package houserules

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every image the deployment manifests and docker-compose.yml name is
// pinned to a tag, never latest: a rollout then runs the build it was
// given, and a node's cache cannot mix two.
func TestDeployedImagesArePinned(t *testing.T) {
	root := moduleRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "deploy", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "docker-compose.yml"))
	image := regexp.MustCompile(`^\s*(?:-\s*)?image:\s*"?([^"\s#]+)`)
	seen := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			m := image.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			seen++
			ref := m[1]
			_, tag, ok := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
			if !ok || tag == "" || tag == "latest" {
				t.Errorf("%s:%d: image %s is not pinned to a tag", filepath.Base(f), i+1, ref)
			}
		}
	}
	if seen < 4 {
		t.Fatalf("found %d images in deploy/ and docker-compose.yml: the pattern no longer matches the manifests", seen)
	}
}
