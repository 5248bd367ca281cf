package blob

import "strings"

// JoinURL appends a path to a bucket URL, before any query: the URL of a
// table sub under the bucket URL root ("s3://lake?endpoint=…" and
// "runs/t" give "s3://lake/runs/t?endpoint=…"). An empty sub is root.
func JoinURL(root, sub string) string {
	if sub == "" {
		return root
	}
	base, query, _ := strings.Cut(root, "?")
	u := strings.TrimSuffix(base, "/") + "/" + sub
	if query != "" {
		u += "?" + query
	}
	return u
}
