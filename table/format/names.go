package format

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/stratadb/strata/blob"
)

// Where tables may live in a bucket.
//
// A table is a folder: the path of its folder under a root (a bucket, or
// a folder of one) is its name there, and a folder is a table when its
// _versions/ folder holds a manifest. Of a table's folder, data/ and
// every folder whose name begins with "_" or "." are the table's own
// (Reserved): what it writes goes there, and later format versions add
// only such names. Its other folders are not the table's, and may hold
// other tables: "runs" and "runs/eval" may both be tables.
//
// A table's name is one or more segments joined by "/", each 1 to 128 of
// [A-Za-z0-9._-] not beginning with "." (CheckName), at most MaxNameLen
// bytes in all. A segment may be any of a table's own folder names
// ("_versions", "data", "_shards") or contain one ("run_versions"): it
// is that only inside a table, so "x/_shards/y" is a legal name, and
// creating it is refused only if x is a table (CheckPlacement). What
// finds tables (ListTables) walks folders and never looks inside a
// table's own.

// MaxNameLen bounds a table's name in bytes, so that every key a table
// writes fits the 1,024 bytes object stores allow.
const MaxNameLen = 512

// NameError says why a table name is refused.
type NameError struct {
	Name   string
	Reason string
}

func (e *NameError) Error() string { return fmt.Sprintf("table name %q: %s", e.Name, e.Reason) }

// Is makes errors.Is(err, ErrBadName) true.
func (e *NameError) Is(target error) bool { return target == ErrBadName }

// PlacementError says why a table cannot be created where it was asked.
type PlacementError struct {
	Name   string // the table asked for
	Table  string // the table whose own folder is in the way
	Folder string // that folder, relative to the table's
	Inside bool   // the new table would lie in Table's Folder (else: hold Table in its own)
}

func (e *PlacementError) Error() string {
	if e.Inside {
		return fmt.Sprintf("table %q would lie in %s/ of table %q, a folder that table keeps for its own objects", e.Name, e.Folder, orRoot(e.Table))
	}
	return fmt.Sprintf("table %q cannot be created: its %s/ folder, which would be its own, holds table %q", e.Name, e.Folder, e.Table)
}

// Is makes errors.Is(err, ErrPlacement) true.
func (e *PlacementError) Is(target error) bool { return target == ErrPlacement }

func orRoot(name string) string {
	if name == "" {
		return "(the root)"
	}
	return name
}

// Reserved reports whether a folder of that name in a table's folder is
// the table's own: data, and every name beginning with "_" or ".".
func Reserved(segment string) bool {
	return segment == "data" || strings.HasPrefix(segment, "_") || strings.HasPrefix(segment, ".")
}

// CheckName checks a table's name (see "Where tables may live" above);
// the error is a *NameError.
func CheckName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return &NameError{name, fmt.Sprintf("want 1 to %d bytes", MaxNameLen)}
	}
	for seg := range strings.SplitSeq(name, "/") {
		if why := checkSegment(seg); why != "" {
			return &NameError{name, why}
		}
	}
	return nil
}

// CheckSegment checks one segment of a table's name: for a table whose
// folder's path is not all its name (a URL's last segment).
func CheckSegment(seg string) error {
	if why := checkSegment(seg); why != "" {
		return &NameError{seg, why}
	}
	return nil
}

func checkSegment(seg string) string {
	const want = "each /-separated part 1 to 128 of [A-Za-z0-9._-], not beginning with '.'"
	if seg == "" || len(seg) > 128 || seg[0] == '.' {
		return want
	}
	for _, r := range seg {
		if !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return want
		}
	}
	return ""
}

// CheckPlacement checks, before a table is created at path, that it
// shares no folder with another table's own objects: no table above it
// keeps the folder it would go in (isTable tells whether the path above
// is a table, "" the root; it is asked only about paths just above a
// reserved segment of path, so usually never), and no folder of its own
// (in b, the new table's folder) holds a table. The error is a
// *PlacementError. It is a check before the create, not a lock: two
// creates at once can both pass it.
func CheckPlacement(ctx context.Context, b blob.Bucket, path string, isTable func(ctx context.Context, above string) (bool, error)) error {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i, seg := range segs {
		if !Reserved(seg) {
			continue
		}
		above := strings.Join(segs[:i], "/")
		ok, err := isTable(ctx, above)
		if err != nil {
			return err
		}
		if ok {
			return &PlacementError{Name: path, Table: above, Folder: seg, Inside: true}
		}
	}
	// A table there already: the create reports it.
	if _, err := versionAt(ctx, b, ""); err == nil || !errors.Is(err, ErrNotFound) {
		return err
	}
	folders, err := blob.Folders(ctx, b, "")
	if err != nil {
		return err
	}
	for _, f := range folders {
		if !Reserved(f) {
			continue
		}
		found, err := discover(ctx, b, f+"/")
		if err != nil {
			return err
		}
		if len(found) > 0 {
			return &PlacementError{Name: path, Table: path + "/" + found[0].Name, Folder: f}
		}
	}
	return nil
}
