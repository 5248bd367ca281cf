package blob_test

import (
	"testing"

	"github.com/stratadb/strata/blob"
)

// A table's URL under a bucket URL keeps the bucket's query at the end,
// whatever slashes the two bring; an empty path is the bucket's own URL.
func TestJoinURLPutsThePathBeforeTheQuery(t *testing.T) {
	for _, c := range []struct{ root, sub, want string }{
		{"s3://lake?endpoint=http://minio:9000", "runs/t", "s3://lake/runs/t?endpoint=http://minio:9000"},
		{"s3://lake/?region=us", "t", "s3://lake/t?region=us"},
		{"file:///data/tables", "a/b", "file:///data/tables/a/b"},
		{"gs://b/p?x=1", "", "gs://b/p?x=1"},
	} {
		if got := blob.JoinURL(c.root, c.sub); got != c.want {
			t.Errorf("JoinURL(%q, %q) = %q, want %q", c.root, c.sub, got, c.want)
		}
	}
}
