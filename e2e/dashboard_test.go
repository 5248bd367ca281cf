package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// queriedMetrics returns the metric families the Grafana dashboard and the
// alert rules under deploy/ query (a histogram by its own name, not its
// _bucket, _count or _sum series).
func queriedMetrics(t *testing.T, root string) []string {
	t.Helper()
	var queried []string
	for _, f := range []string{"deploy/grafana-dashboard.json", "deploy/prometheus-rules.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".json") && !json.Valid(data) {
			t.Fatalf("%s is not JSON", f)
		}
		for _, m := range regexp.MustCompile(`\b(strata_[a-z0-9_]+)`).FindAllStringSubmatch(string(data), -1) {
			name := m[1]
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if strings.HasSuffix(name, "_seconds"+suffix) {
					name = strings.TrimSuffix(name, suffix)
				}
			}
			if !slices.Contains(queried, name) {
				queried = append(queried, name)
			}
		}
	}
	if len(queried) < 10 {
		t.Fatalf("found only %v in the dashboard and rules", queried)
	}
	return queried
}
