// Package api is the wire format of Strata's HTTP server: the JSON bodies
// its routes take and answer, the media types, and the error codes. It is
// what the server and its clients share, and nothing else: it imports no
// engine package, so a program that only talks to a server (package
// client) links this and Arrow, not the object-store SDKs.
//
// Every JSON name is lowercase with underscores. A field that a reader
// cannot know is absent or null, never a zero standing for "unknown"; each
// type says which. The OpenAPI document the server serves at
// /api/v1/openapi.json describes the same shapes.
package api

import "time"

// Media types of request and response bodies.
const (
	ArrowStream = "application/vnd.apache.arrow.stream" // Arrow IPC stream
	NDJSON      = "application/x-ndjson"                // JSON lines, one object a row
	JSON        = "application/json"
	CSV         = "text/csv"
)

// Error codes: the "code" of an ErrorBody. A client decides on the status
// and the code; the message is for people.
const (
	CodeBadRequest           = "bad_request"            // 400: a parameter or body the route does not take
	CodeBadInput             = "bad_input"              // 400: rows that do not match the table's schema
	CodeBadTableName         = "bad_table_name"         // 400
	CodeBadFraming           = "bad_framing"            // 400: a body framed two ways (Content-Length and Transfer-Encoding) or a malformed chunked body; the connection closes
	CodeUnsupportedSchema    = "unsupported_schema"     // 400: a schema Strata cannot store
	CodeUnauthorized         = "unauthorized"           // 401: the server wants a bearer token
	CodeForbidden            = "forbidden"              // 403: the token lacks the grant the request needs (the message names it)
	CodeNotFound             = "not_found"              // 404: table, version, tag or shard
	CodeNoRoute              = "no_route"               // 404
	CodeMethodNotAllowed     = "method_not_allowed"     // 405
	CodeBodyTooSlow          = "body_too_slow"          // 408
	CodeExists               = "exists"                 // 409: table or tag
	CodeBadPlacement         = "bad_placement"          // 409: a table that would share a folder with another table's own objects
	CodeSequenceExpired      = "sequence_expired"       // 409: a sequence number older than those the server keeps for its producer
	CodeKeyReused            = "idempotency_key_reused" // 422: the request's name was used before for another body
	CodeConflict             = "conflict"               // 409: a commit lost to a concurrent one it cannot follow
	CodeCompactionRunning    = "compaction_running"     // 409
	CodeLeaseHeld            = "lease_held"             // 409: another compactor holds the table's lease
	CodeNotDue               = "not_due"                // 409: the compaction policy says not now
	CodeVersionCollected     = "version_collected"      // 410: garbage collection removed a version the request needs (the message names the oldest left)
	CodeTooLarge             = "too_large"              // 413
	CodeTooManyKeys          = "too_many_keys"          // 413
	CodeUnsupportedMediaType = "unsupported_media_type" // 415
	CodeBusy                 = "busy"                   // 429: over the memory budget, or a merge runs
	CodeMergeRunning         = "merge_running"          // 429
	CodeInternal             = "internal"               // 500
	CodeUnsupportedFormat    = "unsupported_format"     // 501: the table is written in a format newer than the server's build (the message names both)
	CodeDataMissing          = "data_missing"           // 500: the store lost or damaged an object holding acknowledged rows (strata repair)
	CodeUnavailable          = "unavailable"            // 503: the server's shard was fenced or closed
	CodeDraining             = "draining"               // 503: the server is shutting down
	CodeStoreUnavailable     = "store_unavailable"      // 503: the object store failed in a way worth retrying
	CodeOutcomeUnknown       = "outcome_unknown"        // 503: an append's rows may have been stored; sent again, they may be stored twice
)

// statuses are the HTTP statuses of the error codes.
var statuses = map[string]int{
	CodeBadRequest: 400, CodeBadInput: 400, CodeBadTableName: 400, CodeBadFraming: 400, CodeUnsupportedSchema: 400,
	CodeUnauthorized: 401, CodeForbidden: 403, CodeNotFound: 404, CodeNoRoute: 404, CodeMethodNotAllowed: 405, CodeBodyTooSlow: 408,
	CodeExists: 409, CodeBadPlacement: 409, CodeSequenceExpired: 409, CodeConflict: 409, CodeCompactionRunning: 409,
	CodeLeaseHeld: 409, CodeNotDue: 409, CodeVersionCollected: 410, CodeTooLarge: 413, CodeTooManyKeys: 413,
	CodeUnsupportedMediaType: 415, CodeKeyReused: 422, CodeBusy: 429, CodeMergeRunning: 429, CodeInternal: 500, CodeUnsupportedFormat: 501,
	CodeDataMissing: 500, CodeUnavailable: 503, CodeDraining: 503, CodeStoreUnavailable: 503, CodeOutcomeUnknown: 503,
}

// Status is the HTTP status a server answers an error of code with (500
// for a code it does not know).
func Status(code string) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return 500
}

// ErrorBody is the body of every error answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the error inside an ErrorBody.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// TableInfo is what GET and PUT /api/v1/tables/{name} answer.
type TableInfo struct {
	Name      string `json:"name"`
	Version   uint64 `json:"version"`
	Rows      int64  `json:"rows"`
	Fragments int    `json:"fragments"`
	Bytes     int64  `json:"bytes"`
	Schema    Schema `json:"schema"`
	// ClusterBy names the columns of the table's cluster key, when it has
	// one: compaction sorts its fragments by them.
	ClusterBy []string `json:"cluster_by,omitempty"`
}

// FragmentList is what GET /api/v1/tables/{name}/fragments answers: the
// fragments of one version in the manifest's order, for readers that
// split a version between them (GET …/rows?version=V&fragment=ID&offsets=LO:HI
// reads a slice of one).
type FragmentList struct {
	Version   uint64         `json:"version"`
	Fragments []FragmentInfo `json:"fragments"`
}

// FragmentInfo is one fragment of a FragmentList.
type FragmentInfo struct {
	ID       uint64 `json:"id"`
	Rows     int64  `json:"rows"`      // its rows' offsets are 0 … rows-1
	LiveRows int64  `json:"live_rows"` // those not deleted
	Bytes    int64  `json:"bytes"`
}

// TableList is what GET /api/v1/tables answers.
type TableList struct {
	Tables []ListedTable `json:"tables"`
}

// ListedTable is one table of a TableList with its newest version.
type ListedTable struct {
	Name    string `json:"name"`
	Version uint64 `json:"version"`
}

// AppendResult is what POST …/rows answers once the rows are durable.
type AppendResult struct {
	Rows int64 `json:"rows"`
	// Shard and Position: the WAL entry that holds the rows. A client that
	// names them in its reads (written=SHARD:POSITION, the newest position
	// of each shard) reads its own writes before they are merged.
	Shard    string `json:"shard,omitempty"`
	Position uint64 `json:"position,omitempty"`
	// Duplicate: the request's name was recorded already; nothing was
	// stored, and Rows and Position are the first request's.
	Duplicate bool `json:"duplicate,omitempty"`
	// An upsert (mode=upsert) commits to the table directly: Version holds
	// it, and Replaced is the number of rows it deleted because a row it
	// wrote has their key.
	Version  uint64 `json:"version,omitempty"`
	Replaced int64  `json:"replaced,omitempty"`
	// A merge by key with clauses (mode=upsert&when_…): the rows it
	// inserted (their key was new), those that updated their key's rows,
	// and the table's rows it deleted for their key's absence from the
	// merge's rows.
	Inserted int64 `json:"inserted,omitempty"`
	Updated  int64 `json:"updated,omitempty"`
	Deleted  int64 `json:"deleted,omitempty"`
}

// Headers that name a request carrying rows (an append, a create with
// rows), so that sending it again after losing the answer stores nothing
// twice; see docs/format.md, "Idempotent appends".
const (
	// HeaderIdempotencyKey: a key of the caller's for one request (1 to
	// MaxIdempotencyKeyBytes bytes).
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderProducer and HeaderSequence: a client instance and the
	// number of its request; the server keeps a few numbers per producer.
	HeaderProducer = "Strata-Producer"
	HeaderSequence = "Strata-Sequence"
	// MaxIdempotencyKeyBytes and MaxProducerBytes bound an
	// Idempotency-Key and a Strata-Producer: the server keeps either
	// behind a prefix ("key:", "producer:") in a name of at most 256
	// bytes.
	MaxIdempotencyKeyBytes = 252
	MaxProducerBytes       = 247
	// HeaderReplayed: "true" on an answer that repeats the first
	// request's outcome.
	HeaderReplayed = "Idempotent-Replayed"
)

// DeleteResult is what DELETE …/rows answers.
// UpdateRequest is the body of PATCH …/rows?filter=EXPR: the columns to
// set in the matching rows, each to a JSON value (null for a null) in Set,
// or to an expression over the row's columns in SetSQL, written as the
// CLI's --set ("reward = reward * 2, step = step + 1"); one or both.
type UpdateRequest struct {
	Set    map[string]any `json:"set,omitempty"`
	SetSQL string         `json:"set_sql,omitempty"`
}

// UpdateResult answers PATCH …/rows.
type UpdateResult struct {
	Updated int64  `json:"updated"`
	Version uint64 `json:"version"` // the version holding the update (or the latest, when nothing matched)
}

type DeleteResult struct {
	Deleted int64  `json:"deleted"`
	Version uint64 `json:"version"` // the version holding the delete (or the latest, when nothing matched)
}

// CountResult answers GET …/count: Rows match the filter in Version.
// FragmentsScanned fragments were read because their statistics could not
// decide; Scanned: rows not merged yet were counted too (fresh=true, or
// the client's own writes), by a scan.
type CountResult struct {
	Rows             int64  `json:"rows"`
	Version          uint64 `json:"version"`
	FragmentsScanned int    `json:"fragments_scanned"`
	Scanned          bool   `json:"scanned,omitempty"`
}

// TakeRequest is the body of POST …/take.
type TakeRequest struct {
	Column string `json:"column,omitempty"` // default "id"
	// Keys are values of the key column: integers, strings or booleans,
	// as it holds; a binary column's as []byte (sent in base64).
	Keys    []any    `json:"keys"`
	Columns []string `json:"columns,omitempty"`
}

// Version is one entry of GET …/versions.
type Version struct {
	Version uint64    `json:"version"`
	Time    time.Time `json:"time"`           // when the manifest was written (the store's clock)
	Kind    string    `json:"kind,omitempty"` // with detail=true: the operation (append, delete, rewrite, …)
	Rows    int64     `json:"rows,omitempty"` // with detail=true: the rows of the version
}

// Tag names a version: an entry of GET …/tags and the answer of POST …/tags.
type Tag struct {
	Name    string    `json:"name"`
	Version uint64    `json:"version"`
	Created time.Time `json:"created"`
}

// TagRequest is the body of POST …/tags; version 0 is the latest.
type TagRequest struct {
	Name    string `json:"name"`
	Version uint64 `json:"version,omitempty"`
}

// Index is a key index of an integer, string or binary column.
type Index struct {
	ID     string `json:"id"`
	Column string `json:"column"`
	Key    string `json:"key"` // the index object, relative to the table
	Rows   int64  `json:"rows"`
	// CoveredBelow: the index holds every row of the fragments with a
	// smaller id that existed when it was built; newer fragments are found
	// by a statistics-pruned scan.
	CoveredBelow uint64 `json:"covered_below"`
}

// IndexList is what GET …/indexes answers.
type IndexList struct {
	Indexes []Index `json:"indexes"`
}

// IndexRequest is the body of POST …/indexes.
type IndexRequest struct {
	Column string `json:"column"`
}

// CompactRequest is the optional body of POST …/compact. Fields left out
// take the server's policy. Without Force a compaction waits out the
// policy's quiet windows, and MinFragments, when given, must be reached.
type CompactRequest struct {
	MinFragments int   `json:"min_fragments,omitempty"`
	TargetRows   int64 `json:"target_rows,omitempty"`
	TargetBytes  int64 `json:"target_bytes,omitempty"`
	DryRun       bool  `json:"dry_run,omitempty"`
	Force        bool  `json:"force,omitempty"`
}

// GCRequest is the optional body of POST …/gc: durations as Go writes them
// ("168h", "30m"); fields left out take the collector's defaults (10
// versions, 1h, 1h). Retain and SafetyAge are at least 5m.
type GCRequest struct {
	KeepVersions *int   `json:"keep_versions,omitempty"` // the newest versions always kept (at least 1)
	Retain       string `json:"retain,omitempty"`        // versions younger than this are kept
	SafetyAge    string `json:"safety_age,omitempty"`    // unreferenced objects younger than this are kept
	DryRun       bool   `json:"dry_run,omitempty"`
}

// GCResult answers POST …/gc: what the collection deleted (in a dry run,
// what it would, with Plan).
type GCResult struct {
	Boundary        uint64 `json:"boundary"` // versions at or below it may be gone
	VersionsKept    int    `json:"versions_kept"`
	VersionsDeleted int    `json:"versions_deleted"`
	ObjectsDeleted  int    `json:"objects_deleted"`
	BytesFreed      int64  `json:"bytes_freed"`
	DryRun          bool   `json:"dry_run"`
	Plan            string `json:"plan,omitempty"`
}

// CompactPlan is what a dry run of POST …/compact answers.
type CompactPlan struct {
	Version         uint64 `json:"version"` // the version planned against
	Bins            int    `json:"bins"`
	FragmentsBefore int    `json:"fragments_before"`
	FragmentsAfter  int    `json:"fragments_after"`
	Plan            string `json:"plan"`
}

// CompactStats is what GET …/compact/stats answers. Every field is always
// there: what is unknown or absent is null.
type CompactStats struct {
	Fragments int `json:"fragments"`
	// Running: a compactor holds the table's lease (this server, the Job,
	// a CLI); Holder names it and LeaseExpires says until when.
	Running      bool       `json:"running"`
	Holder       *string    `json:"holder"`
	LeaseExpires *time.Time `json:"lease_expires"`
	// Due: whether the server's policy would compact now, and why.
	Due              bool       `json:"due"`
	DueReason        string     `json:"due_reason"`
	LastCompaction   *time.Time `json:"last_compaction"`
	TotalCompactions int64      `json:"total_compactions"`
	// LastError: the newest failed compaction's error, null once a
	// compaction commits after it (Runs has every kind's).
	LastError    *string    `json:"last_error"`
	LastErrorAt  *time.Time `json:"last_error_at"`
	TotalAdopted int64      `json:"total_adopted"`
	// Runs: the newest recorded run of each kind (compaction, merge,
	// adoption, export, gc) that the history holds, by kind.
	Runs    map[string]KindRun `json:"runs"`
	History []CompactRun       `json:"history"` // newest first
	// SkippedRecords: history records that do not decode, each named with
	// why.
	SkippedRecords []string `json:"skipped_records,omitempty"`
}

// KindRun is the newest recorded run of one kind: when it started, how
// long it took, when one last succeeded, and its error (absent once a run
// of that kind succeeds after it).
type KindRun struct {
	LastRun     time.Time `json:"last_run"`
	DurationS   float64   `json:"duration_s"`
	LastSuccess time.Time `json:"last_success,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// CompactRun is one recorded run of a compactor: a compaction, a fleet
// merge, an adoption sweep, an Iceberg export or a garbage collection
// (Kind).
type CompactRun struct {
	Kind            string    `json:"kind"`
	Started         time.Time `json:"started"`
	DurationS       float64   `json:"duration_s"`
	Version         uint64    `json:"version,omitempty"` // absent: nothing committed
	FragmentsBefore int       `json:"fragments_before"`
	FragmentsAfter  int       `json:"fragments_after"`
	Rows            int64     `json:"rows"`
	BytesRewritten  int64     `json:"bytes_rewritten"`
	Error           string    `json:"error,omitempty"`
	Adopted         []string  `json:"adopted,omitempty"` // abandoned shards the run adopted
	ObjectsDeleted  int       `json:"objects_deleted,omitempty"`
	Generations     int       `json:"generations,omitempty"` // a fleet merge's
	// Running totals as of this run.
	LastCompaction   time.Time `json:"last_compaction,omitzero"`
	TotalCompactions int64     `json:"total_compactions"`
	LastError        string    `json:"last_error,omitempty"`
	LastErrorAt      time.Time `json:"last_error_at,omitzero"`
	TotalAdopted     int64     `json:"total_adopted"`
}

// LSMStats is what GET …/lsm/stats answers: every shard of the table.
// A server knows its own shard's memtable; of other shards it knows what
// the bucket shows, so those fields are absent.
type LSMStats struct {
	Version uint64       `json:"version"`
	Merging bool         `json:"merging"` // a fleet merge of this server runs
	Shards  []ShardStats `json:"shards"`
}

// ShardStats is one shard of LSMStats. Fields a reader cannot know are
// absent, never zero: memtable, merging and compacting for shards the
// server does not own, pending_rows unless include_generation_rows=true.
type ShardStats struct {
	Shard              string  `json:"shard"`
	Own                bool    `json:"own"` // written through this server
	Epoch              uint64  `json:"epoch"`
	WALLastWritten     uint64  `json:"wal_last_written"`
	WALFlushed         uint64  `json:"wal_flushed"`
	WALLag             uint64  `json:"wal_lag"`
	MemtableRows       *int64  `json:"memtable_rows,omitempty"`
	MemtableBytes      *int64  `json:"memtable_bytes,omitempty"`
	MemtableFrom       *uint64 `json:"memtable_from,omitempty"` // lowest WAL position in the memtable; 0 when empty
	Watermark          uint64  `json:"watermark"`
	PendingGenerations int     `json:"pending_generations"`
	PendingBytes       int64   `json:"pending_bytes"`
	PendingRows        *int64  `json:"pending_rows,omitempty"`
	NewestGeneration   uint64  `json:"newest_generation"`
	Merging            *bool   `json:"merging,omitempty"` // the shard's own merge runs
	// Compacting is Merging under the name it had before (a merge
	// installs generations and compacts nothing), still sent for clients
	// that read it.
	Compacting  *bool         `json:"compacting,omitempty"`
	LastWrite   *time.Time    `json:"last_write,omitempty"`
	Quarantined []Quarantined `json:"quarantined,omitempty"`
}

// Quarantined is a WAL entry that could not be decoded, kept aside with
// why; its rows are not in the table.
type Quarantined struct {
	Position uint64 `json:"position"`
	Key      string `json:"key"` // the copy under quarantine/
	Reason   string `json:"reason"`
}

// Consumer is a named consumer's position (GET/PUT …/consumers): it has
// read every change through Version; Lag is how many versions the table is
// ahead of it.
type Consumer struct {
	Name    string    `json:"name"`
	Version uint64    `json:"version"`
	Updated time.Time `json:"updated"`
	Lag     uint64    `json:"lag_versions"`
}

// ConsumerRequest is the body of PUT …/consumers/{consumer}.
type ConsumerRequest struct {
	Version uint64 `json:"version"`
}

// RestoreRequest is the body of POST …/restore: one of Version, Tag and
// AsOf (the newest version committed at or before a time: RFC 3339, or a
// duration before now such as "2h").
type RestoreRequest struct {
	Version uint64 `json:"version,omitempty"`
	Tag     string `json:"tag,omitempty"`
	AsOf    string `json:"as_of,omitempty"`
}

// RestoreResult answers a restore: the version it committed, which
// version's rows it holds, and how many.
type RestoreResult struct {
	Version  uint64 `json:"version"`
	Restored uint64 `json:"restored"`
	Rows     int64  `json:"rows"`
}
