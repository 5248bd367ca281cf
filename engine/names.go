package engine

import (
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/fleetmerge"
	"github.com/stratadb/strata/walshard/wal"
)

// The engine's parts (commit, walshard, compactor, lakehouse) define the
// values that a DB takes and answers. A driver — the server, the Job, the
// command-line verbs — names them here, under the engine, and imports none
// of the parts: the engine is the one way in to a table.

// Commits and their outcomes.
type (
	CommitOptions = commit.Options
	Result        = commit.Result
	UpdateResult  = commit.UpdateResult
	UpsertResult  = commit.UpsertResult
	UpsertClauses = commit.UpsertClauses
)

// The process's WAL shard, its fleet and their merges.
type (
	ShardOptions = walshard.Options
	ShardStats   = walshard.Stats
	ShardLag     = fleetmerge.ShardLag
	Quarantined  = walshard.Quarantined
	StallInfo    = walshard.StallInfo
	FleetOptions = fleetmerge.Options
	FleetResult  = fleetmerge.Result
	AdoptResult  = walshard.AdoptResult
	// ShardHandle is an open WAL shard (DB.Shard): a worker reads what
	// it acknowledged through it.
	ShardHandle = walshard.Shard
)

// Compaction, garbage collection and the table's history of runs.
type (
	Policy         = compactor.Policy
	Window         = compactor.Window
	GCPolicy       = compactor.GCPolicy
	GCResult       = compactor.GCResult
	CompactTune    = compactor.Options
	CompactResult  = compactor.Result
	CompactionPlan = compactor.Plan
	Part           = compactor.Part
	Run            = compactor.Run
	Status         = compactor.Status
	KindStatus     = compactor.KindStatus
	Lease          = compactor.Lease
	LeaseHeldError = compactor.LeaseHeldError
)

// Defaults and bounds of the options above.
const (
	DefaultLeaseTTL          = compactor.DefaultLeaseTTL
	MinLeaseTTL              = compactor.MinLeaseTTL
	DefaultMemoryBudget      = compactor.DefaultMemoryBudget
	MinMemoryBudget          = compactor.MinMemoryBudget
	DefaultRetireShardsAfter = compactor.DefaultRetireShardsAfter
	MinRetain                = compactor.MinRetain
	DefaultHolder            = compactor.DefaultHolder
	DefaultReuseBytes        = walshard.DefaultReuseBytes
	StallMemtable            = walshard.StallMemtable
	StallGenerations         = walshard.StallGenerations
	DropWait                 = walshard.DropWait
	RunCompaction, RunGC     = compactor.KindCompaction, compactor.KindGC
	RunAdoption, RunMerge    = compactor.KindAdoption, compactor.KindMerge
	RunExport                = compactor.KindExport
)

// RunKinds are the kinds of run a table's history records, in the order
// stats shows them; KindOf tells a run's.
var RunKinds = compactor.Kinds

// KindOf is the kind of a run of the table's history (one of RunKinds).
func KindOf(r Run) string { return compactor.KindOf(r) }

// The parts' errors that a driver tells apart (errors.Is); every other is
// told by Code.
var (
	ErrConflict          = commit.ErrConflict
	ErrOutcomeUnknown    = commit.ErrOutcomeUnknown
	ErrBadClauses        = commit.ErrBadClauses
	ErrAppendUnknown     = walshard.ErrAppendUnknown
	ErrSchemaChanged     = walshard.ErrSchemaChanged
	ErrDropped           = walshard.ErrDropped
	ErrFenced            = walshard.ErrFenced
	ErrUnknownShard      = walshard.ErrUnknownShard
	ErrLeaseHeld         = compactor.ErrLeaseHeld
	ErrInvalidShard      = wal.ErrInvalidOptions
	ErrInvalidCompaction = compactor.ErrInvalidOptions
)

// CheckShardID says whether id can name a WAL shard, and why not.
func CheckShardID(id string) error { return wal.CheckShardID(id) }

// ParseWindow reads a quiet window of a compaction policy: "22-6" (hours,
// UTC).
func ParseWindow(s string) (Window, error) { return compactor.ParseWindow(s) }
