package table

import (
	"crypto/rand"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/oklog/ulid/v2"
)

// Object layout under a table's prefix.
const (
	VersionsDir  = "_versions/"
	DataDir      = "data/"
	DeletionsDir = "_deletions/"
	TagsDir      = "_refs/tags/"
	// GCBoundaryDir holds the garbage collector's boundary objects; see
	// docs/format.md.
	GCBoundaryDir  = "_gc/boundary/"
	manifestSuffix = ".manifest"
)

// ManifestKey names version v's manifest: the 20-digit decimal of
// MaxUint64 − v, so newer versions sort first.
func ManifestKey(v uint64) string {
	return VersionsDir + Inverted(v) + manifestSuffix
}

// ParseManifestKey returns the version a manifest key names.
func ParseManifestKey(key string) (uint64, bool) {
	name, ok := strings.CutPrefix(key, VersionsDir)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(name, manifestSuffix)
	if !ok {
		return 0, false
	}
	return ParseInverted(digits)
}

// Inverted names n so that larger numbers sort first: the 20 decimal
// digits of MaxUint64 − n. Manifests, GC boundaries, shard objects and
// compactor leases are named this way, so one LIST page shows the newest.
func Inverted(n uint64) string { return fmt.Sprintf("%020d", math.MaxUint64-n) }

// ParseInverted reads what Inverted wrote.
func ParseInverted(digits string) (uint64, bool) {
	if len(digits) != 20 {
		return 0, false
	}
	inv, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return math.MaxUint64 - inv, true
}

// GCBoundaryKey names the boundary object for version v (same inverted
// numbering as manifests: the newest boundary lists first).
func GCBoundaryKey(v uint64) string {
	return GCBoundaryDir + Inverted(v)
}

// ParseGCBoundaryKey returns the version a boundary key names.
func ParseGCBoundaryKey(key string) (uint64, bool) {
	digits, ok := strings.CutPrefix(key, GCBoundaryDir)
	if !ok {
		return 0, false
	}
	return ParseInverted(digits)
}

// NewFragmentKey returns a fresh, random data object key. Keys made by
// one process sort in the order they were made.
func NewFragmentKey() string {
	return DataDir + NewID() + ".parquet"
}

// DeletionKey names a deletion vector for fragment id written at version v.
func DeletionKey(fragmentID, v uint64) string {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return fmt.Sprintf("%s%d-%d-%x.bin", DeletionsDir, fragmentID, v, rnd)
}

// TagKey names a tag.
func TagKey(name string) string { return TagsDir + name + ".json" }

// ids hands out ULIDs that increase within a process, even within one
// millisecond: names made in order list in order.
var ids struct {
	sync.Mutex
	entropy *ulid.MonotonicEntropy
}

// NewID returns a fresh ULID, used for commit and table ids and data
// object names. IDs from one process increase.
func NewID() string {
	ids.Lock()
	defer ids.Unlock()
	if ids.entropy == nil {
		ids.entropy = ulid.Monotonic(rand.Reader, 0)
	}
	return ulid.MustNew(ulid.Now(), ids.entropy).String()
}
