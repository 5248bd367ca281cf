// Package plant holds defects planted on purpose, so that the simulation in
// harness/sim can show it finds them. Each defect lives at one place in
// the engine, which asks this package whether it is on.
//
// In the default build every question is a constant false, so the
// compiler removes the defect and the engine reads nothing: the switches
// exist only in a build with the tag strata_plant, which only the
// simulation's tests use (go test -tags strata_plant ./harness/sim).
package plant

// Defects, by name; the tagged build has a switch for each.
const (
	// MergeForgetsWatermark: a shard merge records the table's old
	// watermark instead of the newest generation it adds, so the next
	// merge adds the same generations again.
	MergeForgetsWatermark = "merge forgets the watermark"
	// GCWithoutSafetyAge: garbage collection deletes unreferenced objects
	// however young, including an upload on its way to a commit.
	GCWithoutSafetyAge = "GC without a safety age"
	// BlindRetry: after a conditional create of a manifest fails, the
	// commit loop does not look for its own commit id; it takes whatever
	// landed for another writer's and commits again.
	BlindRetry = "commit retries blindly after an ambiguous create"
	// FleetMergeSkipsAGeneration: a fleet merge leaves out a shard's
	// oldest pending generation but moves the watermark past it, so its
	// rows never reach the table.
	FleetMergeSkipsAGeneration = "a fleet merge skips a generation below its watermark"
	// RewriteOverDelete: a Rewrite (compaction) commits over a fragment
	// that a concurrent Delete changed, dropping the deletion vector, so
	// deleted rows come back.
	RewriteOverDelete = "a rewrite commits over a fragment a delete changed"
	// NamesForgotten: the check of an idempotent append's name finds
	// nothing, so an append sent again after a lost answer is stored
	// twice.
	NamesForgotten = "an append's name is never found"
	// FleetReadSkipsTheNewestEntry: reading a shard's unflushed WAL stops
	// one entry short of its end, so a fresh read of the fleet misses the
	// rows of each shard's newest entry.
	FleetReadSkipsTheNewestEntry = "a fleet read skips a shard's newest WAL entry"
	// ChangesRepeatDeletes: the changes of a delete are every row the
	// fragment's deletion vector holds, not only those it added, so a
	// row deleted earlier is delivered as deleted again.
	ChangesRepeatDeletes = "changes deliver a fragment's earlier deletes again"
	// UpsertIgnoresLandedKeys: an upsert does not plan again when rows
	// that may hold its keys landed before it (only a common fragment
	// makes it), so two upserts of a new key both insert it.
	UpsertIgnoresLandedKeys = "an upsert ignores rows with its keys that landed first"
	// ColumnsByPosition: a fragment written before a column was dropped is
	// read by position rather than by stored name, so the columns after
	// the dropped one read their neighbours' values.
	ColumnsByPosition = "a fragment's columns are read by position after a drop"
	// FlushKeepsFirstUpsert: a shard's upserts of one key flushed together
	// keep the earliest row of the key, not the last acknowledged.
	FlushKeepsFirstUpsert = "flushed upserts keep a key's first row"
	// ShardSkipsSchemaCheck: a shard never checks that its schema is
	// still the table's, so it acknowledges values in a column another
	// process dropped, and the merge loses them.
	ShardSkipsSchemaCheck = "a shard acknowledges rows under a schema it never checks"
	// MergeIgnoresNames: a merge of shards neither drops a named append's
	// copy whose name the table records nor records the names it
	// installs, so a retry that reached another shard is stored twice.
	MergeIgnoresNames = "a merge installs every copy of a named append"
	// GroupRecordsEveryPartition: a consumer group's member records the
	// version it read through for every partition, not only those it
	// read, so units other members had yet to read are skipped.
	GroupRecordsEveryPartition = "a group member records partitions it did not read"
)

// All lists every defect.
var All = []string{MergeForgetsWatermark, GCWithoutSafetyAge, BlindRetry, FleetMergeSkipsAGeneration, RewriteOverDelete, NamesForgotten, FleetReadSkipsTheNewestEntry, ChangesRepeatDeletes, UpsertIgnoresLandedKeys, ColumnsByPosition, FlushKeepsFirstUpsert, ShardSkipsSchemaCheck, MergeIgnoresNames, GroupRecordsEveryPartition}
