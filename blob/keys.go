package blob

import (
	"errors"
	"strings"
)

var errBadKey = errors.New("invalid key: want slash-separated non-empty segments, none of them \".\" or \"..\", no backslash or NUL")

// CheckKey reports whether key is a valid object key: slash-separated,
// non-empty segments, none "." or "..", no backslash or NUL byte. Every
// backend applies the same rule, so a table written to one store can be
// copied to any other.
func CheckKey(key string) error {
	if key == "" || len(key) > 1024 || strings.ContainsAny(key, "\\\x00") {
		return errBadKey
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return errBadKey
		}
	}
	return nil
}

// checkPrefix accepts "" or a prefix whose complete segments are valid.
func checkPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return CheckKey(strings.TrimSuffix(prefix, "/") + "/x")
}
