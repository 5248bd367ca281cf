package command

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
)

// checkNewTable refuses to create a table at rawURL (b is its folder)
// whose folder's name is not a legal table name, or which would share a
// folder with another table's own objects (format.CheckPlacement): a table
// above it is looked for only where the URL's path has a reserved
// segment, by opening that table's URL.
func checkNewTable(ctx context.Context, env *Env, rawURL string, b blob.Bucket) error {
	head, path, query, err := splitTableURL(rawURL)
	if err != nil {
		return usageError{err}
	}
	if err := format.CheckSegment(path[strings.LastIndex(path, "/")+1:]); err != nil {
		return usageError{err}
	}
	return format.CheckPlacement(ctx, b, path, func(ctx context.Context, above string) (bool, error) {
		ab, err := env.Open(ctx, head+"/"+above+query)
		if err != nil {
			return false, err
		}
		defer ab.Close()
		return format.IsTable(ctx, ab, "")
	})
}

// splitTableURL splits a table's URL into what names its store
// ("s3://bucket", "file://"), the table's path in it without leading or
// trailing "/", and the query ("" or "?…"); a folder's path is made
// absolute.
func splitTableURL(rawURL string) (head, path, query string, err error) {
	if !strings.Contains(rawURL, "://") {
		abs, err := filepath.Abs(rawURL)
		if err != nil {
			return "", "", "", err
		}
		return "file://", strings.Trim(filepath.ToSlash(abs), "/"), "", nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", "", err
	}
	switch u.Scheme {
	case "file":
		return splitTableURL(u.Host + u.Path)
	case "mem":
		head, path = "mem://", u.Host+u.Path
	default:
		head, path = u.Scheme+"://"+u.Host, u.Path
	}
	if u.RawQuery != "" {
		query = "?" + u.RawQuery
	}
	return head, strings.Trim(path, "/"), query, nil
}
