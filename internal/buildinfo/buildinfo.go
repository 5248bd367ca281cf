// Package buildinfo says which build of Strata is running: the module
// version and the VCS revision it was built from.
//
// Go stamps both into binaries built inside a checkout (go build with
// -buildvcs, the default outside of GOFLAGS=-buildvcs=false). A build
// without the checkout's history sets them with
//
//	-ldflags "-X github.com/stratadb/strata/internal/buildinfo.version=V -X github.com/stratadb/strata/internal/buildinfo.revision=R"
//
// which win over what Go stamped.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by -ldflags -X; empty means "as Go stamped it".
var version, revision string

// Info is one build.
type Info struct {
	Version  string `json:"version"`  // module version, "(devel)" when unknown
	Revision string `json:"revision"` // VCS revision, "unknown" when not stamped; "-dirty" when built with local changes
	Time     string `json:"time,omitempty"`
	Go       string `json:"go"`
}

// Get reads the running binary's build.
func Get() Info {
	in := Info{Version: "(devel)", Revision: "unknown", Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			in.Version = bi.Main.Version
		}
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Revision = s.Value
			case "vcs.time":
				in.Time = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && in.Revision != "unknown" {
			in.Revision += "-dirty"
		}
	}
	if version != "" {
		in.Version = version
	}
	if revision != "" {
		in.Revision = revision
	}
	return in
}

// String is the one line a binary prints for --version.
func (in Info) String() string {
	s := fmt.Sprintf("%s (revision %s", in.Version, in.Revision)
	if in.Time != "" {
		s += ", " + in.Time
	}
	return s + ", " + in.Go + ")"
}
