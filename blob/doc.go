// Package blob is Strata's storage boundary: one small Bucket interface over
// object stores (memory, a local folder, S3 and MinIO, GCS), opened by URL.
//
// Everything Strata persists goes through a Bucket. The engine's correctness
// rests on three properties every backend must have, and which the
// conformance suite in package blobtest checks for each:
//
//  1. PutIfAbsent is atomic: among any number of concurrent creates of one
//     key, from any number of processes, exactly one succeeds and every other
//     returns an error for which errors.Is(err, ErrExists) holds.
//  2. An object is visible whole or not at all: a reader never sees a
//     partially written object.
//  3. List returns keys in ascending byte order, so the first key of a
//     listing is the smallest. Strata names manifests so that the smallest
//     name is the newest version. ListDir lists one folder level (a LIST
//     with delimiter "/") in the same order, so that walking folders
//     (finding tables) costs a request per folder, not per object below.
//
// Errors are classified into kinds (ErrNotFound, ErrExists, ErrRetryable,
// ErrPermanent) that callers test with errors.Is; every error returned by a
// Bucket carries the operation and the key (see Error).
//
// An error other than ErrExists from PutIfAbsent does not say whether the
// object was created: the request may have landed and its response been
// lost. Callers that must know read the key back (see package commit).
//
// Open wraps every backend in a Counted bucket, so the requests a table
// costs can be read in-process with StatsOf.
package blob
