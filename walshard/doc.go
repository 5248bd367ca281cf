// Package walshard gives each worker its own shard of a table's
// write-ahead log, so that workers append without contending on the
// table's manifest. It is a part of the engine: a process opens its shard,
// flushes it and merges the fleet through package engine (engine.DB), and
// the drivers never import it (harness/houserules/doors_test.go). Its
// parts sit below it: package walshard/wal holds the shard's objects in the
// store (entries, states, names) and walshard/fleetmerge installs flushed
// generations, every shard's in one commit; this package owns the handle
// (Shard), its appends, flushes, merges, replay and loops.
//
// A worker opens a shard (Open), which claims a new epoch and fences any
// earlier owner. Append returns once the rows are durable in a WAL entry
// in the bucket; concurrent appends are grouped into one entry. Rows also
// go to an in-memory memtable, which Flush seals into an immutable
// generation: one flush object, a Parquet file holding the generation's
// rows with the shard's new state in its footer, created put-if-absent at
// the state's sequence number. Merge commits the flushed generations into
// the base table, recording the shard's watermark (the newest generation
// merged) in the same manifest. A flush object lives under _fleet/flush/,
// where one LIST finds every shard's, and never joins the table as it is:
// a merge copies its rows, every shard's of a fleet merge into one new
// fragment, and the fleet merge deletes it once merged (a minute later).
// So a flush costs one write, and its merge one read. With
// Options.ReuseBytes, large WAL entries are Parquet fragments too, and
// join the table as parts of their generations, so that their rows are
// written to the store once.
//
// Objects, under _shards/<shard>/ (docs/format.md has the details):
//
//	epochs/<inverted epoch>          claims, put-if-absent
//	wal/<inverted position>          WAL entries and fences, put-if-absent
//	                                 (a data entry may be a table fragment too)
//	gen/<generation>-e<epoch>.parquet a merge's copy of flushed rows
//	                                 (and generations of older builds)
//	state/<inverted seq>.json        older builds' states, and the stand-in
//	                                 that keeps such a build off the shard
//
// and under _fleet/flush/<shard>/:
//
//	<inverted seq>.parquet           flush objects: the shard's states, with
//	                                 the rows of the generation each made
//
// Invariants:
//
//   - Every acknowledged append is stored exactly once: in a WAL entry
//     above the state's flushed position, in a generation the state lists
//     and the table's watermark does not cover, or in the base table.
//     Replay on open reads the WAL entries above the flushed position.
//   - A flush object is deleted only once every generation it holds is
//     merged: at or below the sequence number the table records for the
//     shard (ShardMark.Seq, set by a merge that took every generation of
//     that state), a minute old at least (a fresh read that began before
//     the merge still finds it), and never the shard's newest (its state).
//   - A merge of copies (one fragment holding several shards' rows)
//     applies as planned or not at all: its commit is Whole, and one that
//     meets another merge of its shards plans again. Its fragment is named
//     as a generation of one of its shards, which garbage collection
//     leaves alone until that shard's watermark passes it, so a commit
//     that stalls finds it when it lands.
//   - Merging is exactly-once: the watermark moves in the manifest that adds
//     the rows, and the conflict matrix turns a second merge of the same
//     generations into a no-op.
//   - A fenced writer can do no harm: a new owner writes a fence entry at
//     the first free WAL position and a state object at the next sequence
//     number, so the old owner's next WAL write or state write collides and
//     fails with ErrFenced. The fence outlives cleanup by minutes, and an
//     owner that has not read the epoch claims for a minute reads them
//     before it acknowledges an entry, so an owner paused past the cleanup
//     is fenced too. The old owner can merge only generations a
//     state object recorded, which the new owner also sees, so exactly-once
//     holds for them too.
//   - A WAL entry that is a part of a generation is deleted only by
//     garbage collection, once no kept version references it: the owner's
//     cleanup deletes merged entries only where its state tells parts
//     apart (State.PartsUpTo).
//   - A shard that may hold rows outside the table is registered
//     (_fleet/shards/<shard>): an owner registers it at open, after its
//     epoch claim and before it writes; only an adopter that left it
//     empty takes the registration down, and puts it back if a newer
//     epoch was claimed meanwhile. Sweeps for abandoned shards look at
//     registered shards only, so an adopted shard is adopted once.
//   - Upserts (Upsert) are WAL entries of their own (format version 4,
//     naming the key columns); a flush seals entries of one kind into a
//     generation (appends, or upserts by one set of keys, keeping the last
//     row of each key), and a generation of upserts is merged alone, in a
//     commit that also deletes the table's rows with its keys
//     (commit.Table.MergeKeyed). So a key's row is that of the upsert
//     installed last, and a shard's upserts are installed in WAL order. A
//     fresh read hides the rows an upsert not yet merged replaces.
//   - No object is overwritten: every name above is created once.
package walshard
