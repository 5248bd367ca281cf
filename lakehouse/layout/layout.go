// Package layout names the objects of a table's Apache Iceberg view and
// reads what the view holds on to, for garbage collection and for the
// programs that export it (package lakehouse). It links none of the
// Iceberg libraries: it reads the manifest lists' Avro itself, as iceberg-go
// initialises, at every start of a program that links it, about 6 ms of
// its own (and its table package an expression engine Strata never uses,
// about 120 ms and 32 MB), so programs that only keep the view's objects —
// the table verbs, garbage collection — link this package, not those.
//
// The view's metadata is read here as JSON, for the fields the Iceberg
// table spec gives every format version ("location", "snapshots" with
// "snapshot-id" and "manifest-list"); package lakehouse writes it with the
// Iceberg library and reads it back with it.
package layout

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/stratadb/strata/table/format"
)

// Keys of the view's objects, under the table's prefix.
const (
	MetadataDir = format.IcebergDir + "metadata/"
	DeletesDir  = format.IcebergDir + "deletes/"
	// HintKey names the newest metadata's number, as static-file readers
	// (DuckDB, Spark's Hadoop catalog) expect.
	HintKey = MetadataDir + "version-hint.text"
	// EnginesDir is where engines that append through Strata's Iceberg
	// catalog write their data files and manifests (the view's
	// write.data.path and write.metadata.path): Strata copies the rows
	// and references none of it.
	EnginesDir = format.IcebergDir + "engines/"
)

// MetadataKey names the n-th metadata file.
func MetadataKey(n int) string { return fmt.Sprintf("%sv%d.metadata.json", MetadataDir, n) }

// ParseMetadataKey returns n for a key MetadataKey(n) made.
func ParseMetadataKey(key string) (int, bool) {
	s, ok := strings.CutPrefix(key, MetadataDir+"v")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, ".metadata.json")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0 && strconv.Itoa(n) == s
}

// ManifestListKey names a new manifest list of the snapshot of version v.
func ManifestListKey(v uint64) string {
	return fmt.Sprintf("%ssnap-%d-%s.avro", MetadataDir, v, format.NewID())
}

// ManifestKey names a new manifest.
func ManifestKey() string { return MetadataDir + format.NewID() + "-m.avro" }

// DeleteFileKey names the position-delete file made from the deletion
// vector at dvKey: one per vector, so a vector is converted once, and
// garbage collection keeps the file exactly as long as the vector.
func DeleteFileKey(dvKey string) string {
	return DeletesDir + strings.TrimSuffix(path.Base(dvKey), ".bin") + ".parquet"
}

// ObjectKey turns the full location of one of the view's objects into its
// key under the table's prefix, given the table's location.
func ObjectKey(tableLoc, location string) (string, error) {
	key, ok := strings.CutPrefix(location, tableLoc+"/")
	if !ok {
		return "", fmt.Errorf("lakehouse: %s is not under the table's location %s (was the view written for another location? delete %s to start it afresh)", location, tableLoc, format.IcebergDir)
	}
	return key, nil
}

// CheckLocation says what is wrong with a table's location, or "": every
// file of the view is named under it, in metadata that readers parse, so
// it must be an absolute URI (one that parses, a scheme and "//"), hold no
// control character (a newline would split the names in version-hint.text
// and in readers' logs), and not end with a slash.
func CheckLocation(loc string) string {
	if i := strings.IndexFunc(loc, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(loc[i:])
		return fmt.Sprintf("holds the control character %U", r)
	}
	u, err := url.Parse(loc)
	if err != nil || u.Scheme == "" || !strings.HasPrefix(loc, u.Scheme+"://") {
		return "is not an absolute URI (s3://…, gs://…, file:///…; see LocationOf)"
	}
	if strings.HasSuffix(loc, "/") {
		return "ends with a slash"
	}
	return ""
}

// ErrBadLocation is the kind of error LocationOf returns.
var ErrBadLocation = errors.New("lakehouse: no location Iceberg readers can use")

// LocationOf turns a Strata bucket URL into the table's location as
// Iceberg readers name it: s3://bucket/prefix, gs://bucket/prefix, or
// file:///abs/path for a local folder. The query (endpoint, region) is
// dropped: readers are configured for the store on their side.
func LocationOf(rawURL string) (string, error) {
	if !strings.Contains(rawURL, "://") {
		abs, err := filepath.Abs(rawURL)
		if err != nil {
			return "", fmt.Errorf("%w: %q: %v", ErrBadLocation, rawURL, err)
		}
		return "file://" + filepath.ToSlash(abs), nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrBadLocation, rawURL, err)
	}
	switch u.Scheme {
	case "s3", "gs":
		if u.Host == "" {
			return "", fmt.Errorf("%w: %q names no bucket", ErrBadLocation, rawURL)
		}
		return strings.TrimSuffix(u.Scheme+"://"+u.Host+u.Path, "/"), nil
	case "file":
		p := u.Host + u.Path // file://./rel and file:///abs
		return LocationOf(p)
	default:
		return "", fmt.Errorf("%w: %q (a %s:// bucket cannot be read by other engines; use s3://, gs:// or a folder)", ErrBadLocation, rawURL, u.Scheme)
	}
}
