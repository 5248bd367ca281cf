package layout

import "errors"

// The Iceberg view's sentinel errors, here rather than in package
// lakehouse so that the engine names them without linking the Iceberg
// writer.

// ErrInvalidOptions is the kind of error lakehouse.Options.Validate returns.
var ErrInvalidOptions = errors.New("lakehouse: invalid options")

// ErrLocationMismatch: the view names its files under another location
// than the export's (lakehouse.LocationError says which).
var ErrLocationMismatch = errors.New("lakehouse: the view was written for another location")

// ErrUnsupported is the kind of error for a table the view cannot describe
// without changing what readers see.
var ErrUnsupported = errors.New("lakehouse: not expressible in Iceberg")
