package format

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
	IndicesDir   = "_indices/"
	TagsDir      = "_refs/tags/"
	// IcebergDir holds the Apache Iceberg view of the table's versions
	// (package lakehouse).
	IcebergDir = "_iceberg/"
	// GCBoundaryDir holds the garbage collector's boundary objects; see
	// docs/format.md.
	GCBoundaryDir = "_gc/boundary/"
	// GCClockDir: a collection writes an empty object here, reads its
	// modification time — the store's clock — and deletes it.
	GCClockDir     = "_gc/clock/"
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

// Write-ahead-log shards keep their objects under ShardsDir/<shard>/
// (package walshard); what other processes find them by lives under
// FleetDir:
//
//	_fleet/shards/<shard>                     a shard exists (created when it is first opened)
//	_fleet/pending/<shard>/<20-digit gen>-<20-digit seq> a generation flushed and not
//	                                          yet merged, and the state that records it
//	_fleet/merged/<shard>/<inverted watermark> a merge moved the shard's watermark
//	_fleet/flush/<shard>/<inverted seq>.parquet a flush: the shard's state at seq
//	                                          and the rows of the generation it
//	                                          made, in one object (FlushKey)
//
// _fleet/pending/ and a shard's state/ and gen/ folders are what builds
// before flush objects wrote; they are read, and merged, still.
const (
	ShardsDir       = "_shards/"
	FleetDir        = "_fleet/"
	FleetShardsDir  = FleetDir + "shards/"
	FleetPendingDir = FleetDir + "pending/"
	FleetMergedDir  = FleetDir + "merged/"
	FleetFlushDir   = FleetDir + "flush/"
)

// FlushDir holds a shard's flush objects; FlushKey names the one of state
// seq. One LIST of FleetFlushDir finds every shard's.
func FlushDir(shard string) string { return FleetFlushDir + shard + "/" }
func FlushKey(shard string, seq uint64) string {
	return FlushDir(shard) + Inverted(seq) + ".parquet"
}

// ParseFlushKey returns the shard and state sequence number a flush
// object's key names.
func ParseFlushKey(key string) (shard string, seq uint64, ok bool) {
	rest, ok := strings.CutPrefix(key, FleetFlushDir)
	if !ok {
		return "", 0, false
	}
	shard, name, ok := strings.Cut(rest, "/")
	if !ok || shard == "" {
		return "", 0, false
	}
	seq, ok = ParseInverted(strings.TrimSuffix(name, ".parquet"))
	return shard, seq, ok && strings.HasSuffix(name, ".parquet")
}

// A shard's own objects, under ShardsDir/<shard>/:
//
//	epochs/<inverted epoch>      the owner's fencing epochs
//	wal/<inverted position>      WAL entries
//	state/<inverted seq>.json    the shard's state records
//	quarantine/<inverted pos>    WAL entries that cannot be decoded, kept aside
//	gen/<gen>-e<epoch>-<rnd>.parquet  flushed generations (GenerationKey)

// ShardDir is the folder of one shard.
func ShardDir(shard string) string { return ShardsDir + shard + "/" }

// ShardEpochsDir holds a shard's epochs; ShardEpochKey names one.
func ShardEpochsDir(shard string) string          { return ShardDir(shard) + "epochs/" }
func ShardEpochKey(shard string, e uint64) string { return ShardEpochsDir(shard) + Inverted(e) }

// WALDir holds a shard's WAL entries; WALKey names the one at pos.
func WALDir(shard string) string             { return ShardDir(shard) + "wal/" }
func WALKey(shard string, pos uint64) string { return WALDir(shard) + Inverted(pos) }

// ShardStatesDir holds a shard's state records; ShardStateKey names one.
func ShardStatesDir(shard string) string { return ShardDir(shard) + "state/" }
func ShardStateKey(shard string, seq uint64) string {
	return ShardStatesDir(shard) + Inverted(seq) + ".json"
}

// QuarantineDir holds the WAL entries of a shard put aside; QuarantineKey
// names the copy of the one at pos.
func QuarantineDir(shard string) string             { return ShardDir(shard) + "quarantine/" }
func QuarantineKey(shard string, pos uint64) string { return QuarantineDir(shard) + Inverted(pos) }

// ParseShardKey returns the number a key listed under one of a shard's
// folders (epochs, wal, state, quarantine, and its flush objects' folder)
// names.
func ParseShardKey(dir, key string) (uint64, bool) {
	name, ok := strings.CutPrefix(key, dir)
	if !ok {
		return 0, false
	}
	return ParseInverted(strings.TrimSuffix(strings.TrimSuffix(name, ".json"), ".parquet"))
}

// GenerationKey names generation gen of shard, written by epoch; rnd
// makes each flush attempt's name fresh.
func GenerationKey(shard string, gen, epoch uint64, rnd string) string {
	return fmt.Sprintf("%s%s/gen/%020d-e%d-%s.parquet", ShardsDir, shard, gen, epoch, rnd)
}

// ParseGenerationKey returns the shard and generation number a shard
// object that can be a table fragment names: a generation's key, or a WAL
// entry's (a data entry written as Parquet joins the table as it is, as
// part of the generation that covers its position), whose number is its
// position. A generation's number is never above the newest WAL position
// it covers (it equals it when the generation holds such an entry), and
// above the positions earlier generations cover: so whichever of the two
// a key names, a number at or below the shard's watermark in the table is
// merged, and a fragment's number above it is not.
func ParseGenerationKey(key string) (shard string, gen uint64, ok bool) {
	rest, ok := strings.CutPrefix(key, ShardsDir)
	if !ok {
		return "", 0, false
	}
	if shard, name, ok := strings.Cut(rest, "/wal/"); ok && !strings.Contains(shard, "/") {
		if pos, ok := ParseInverted(name); ok {
			return shard, pos, true
		}
		return "", 0, false
	}
	shard, name, ok := strings.Cut(rest, "/gen/")
	if !ok || strings.Contains(shard, "/") || len(name) < 21 || name[20] != '-' {
		return "", 0, false
	}
	gen, err := strconv.ParseUint(name[:20], 10, 64)
	return shard, gen, err == nil
}

// PendingKey announces generation gen of shard, flushed and not merged,
// recorded by the shard's state seq.
func PendingKey(shard string, gen, seq uint64) string {
	return fmt.Sprintf("%s%s/%020d-%020d", FleetPendingDir, shard, gen, seq)
}

// ParsePendingKey reads what PendingKey wrote.
func ParsePendingKey(key string) (shard string, gen, seq uint64, ok bool) {
	rest, ok := strings.CutPrefix(key, FleetPendingDir)
	if !ok {
		return "", 0, 0, false
	}
	shard, name, ok := strings.Cut(rest, "/")
	if !ok || len(name) != 41 || name[20] != '-' {
		return "", 0, 0, false
	}
	gen, err1 := strconv.ParseUint(name[:20], 10, 64)
	seq, err2 := strconv.ParseUint(name[21:], 10, 64)
	return shard, gen, seq, err1 == nil && err2 == nil
}

// MergedKey records that a merge moved shard's watermark to w.
func MergedKey(shard string, w uint64) string {
	return FleetMergedDir + shard + "/" + Inverted(w)
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

// IndexKey names a new key index object.
func IndexKey(id string) string { return IndicesDir + id + "/index.bin" }
