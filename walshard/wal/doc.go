// Package wal is a shard's objects in the store: WAL entries (their
// encoding and decoding, EncodeEntry and DecodeEntry), the shard's state
// (State, the generations flushed and not yet known to be merged, kept in
// the footer of each flush object), the object names under _shards/<shard>/
// and _fleet/flush/<shard>/ (Layout), the listing of flush objects, and the
// fresh reads of unflushed entries' names and keys. It is a part of
// package walshard, which owns a shard's handle and its loops; the package
// doc of walshard lists the objects and the invariants they keep.
//
// Invariants kept here:
//
//   - Names count down (an inverted position or sequence number), so the
//     first key a LIST returns is the newest; every object is created
//     put-if-absent and never overwritten.
//   - A WAL entry that does not decode is a *CorruptEntryError naming the
//     shard, the position and the key; one that decodes but holds rows the
//     table cannot take is a *PoisonEntryError. Neither is ever skipped in
//     silence.
package wal
