package telemetry

import "testing"

// A table's label is its path under the bucket, whichever address names
// it: the Job's URL with its query, or the server's root joined with the
// table's name.
func TestATablesLabelIsItsPathUnderTheBucket(t *testing.T) {
	for u, want := range map[string]string{
		"s3://lake/runs/eval?endpoint=http://127.0.0.1:9000&region=x": "runs/eval",
		"s3://lake/runs/eval":           "runs/eval",
		"gs://lake/rollouts/":           "rollouts",
		"file:///data/lake/rollouts":    "data/lake/rollouts",
		"s3://lake?endpoint=http://m:9": "lake",
	} {
		if got := TableLabel(u); got != want {
			t.Errorf("TableLabel(%q) = %q, want %q", u, got, want)
		}
	}
}
