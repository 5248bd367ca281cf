// Package plant holds defects planted on purpose, each behind a switch, so
// that the simulation in internal/sim can show it finds them. Every switch
// is off unless a test of internal/sim turns it on; the engine's packages
// read them at the one place each defect lives, and nowhere else.
//
// A switch is an atomic bool so that turning it on in a test and reading it
// from the engine's goroutines is not a data race.
package plant

import "sync/atomic"

var (
	// MergeForgetsWatermark: a shard merge records the table's old
	// watermark instead of the newest generation it adds, so the next
	// merge adds the same generations again.
	MergeForgetsWatermark atomic.Bool
	// GCWithoutSafetyAge: garbage collection deletes unreferenced objects
	// however young, including an upload on its way to a commit.
	GCWithoutSafetyAge atomic.Bool
	// BlindRetry: after a conditional create of a manifest fails, the
	// commit loop does not look for its own commit id; it takes whatever
	// landed for another writer's and commits again.
	BlindRetry atomic.Bool
	// FleetMergeSkipsAGeneration: a fleet merge leaves out a shard's
	// oldest pending generation but moves the watermark past it, so its
	// rows never reach the table.
	FleetMergeSkipsAGeneration atomic.Bool
)
