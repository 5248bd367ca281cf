package engine

import (
	"errors"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/wal"
)

// ErrorCode is one kind of error a table's verbs return, and the code
// every caller gives it: the server answers it with the code and the
// status api.Status names, the CLI exits with its exit code (ExitCode).
// A sentinel (Err) matches with errors.Is; a typed error, Err nil, with
// As (typed).
type ErrorCode struct {
	Err  error
	As   func(error) bool
	Code string // an api.Code*
}

// typed matches errors of type T with errors.As, into a target of each
// call's own: ErrorCodes is shared by every request at once.
func typed[T error]() func(error) bool {
	return func(err error) bool {
		var target T
		return errors.As(err, &target)
	}
}

// ErrorCodes are the engine's errors and their codes, in the order Code
// tries them: the first that matches gives the code. A sentinel of the
// engine's packages that is not here is CodeInternal, and a test says so
// (every sentinel is listed here or among those that never reach a
// caller).
var ErrorCodes = []ErrorCode{
	// A request's name used again, for another body or too late.
	{format.ErrKeyReused, nil, api.CodeKeyReused},
	{format.ErrSequenceExpired, nil, api.CodeSequenceExpired},
	{format.ErrBadIdempotency, nil, api.CodeBadRequest},
	{nil, typed[*format.ChangesCollectedError](), api.CodeVersionCollected},
	// What is not there, or is already.
	{format.ErrNotFound, nil, api.CodeNotFound},
	{walshard.ErrUnknownShard, nil, api.CodeNotFound},
	{format.ErrVersionNotFound, nil, api.CodeNotFound},
	{format.ErrTagNotFound, nil, api.CodeNotFound},
	{format.ErrExists, nil, api.CodeExists},
	{format.ErrTagExists, nil, api.CodeExists},
	{commit.ErrConflict, nil, api.CodeConflict},
	{ErrCopyDiverged, nil, api.CodeConflict},
	{ErrCopyBehind, nil, api.CodeVersionCollected},
	{format.ErrPlacement, nil, api.CodeBadPlacement},
	{ingest.ErrTooLarge, nil, api.CodeTooLarge},
	// Bad input: rows, schemas, words of a request, options.
	{evolve.ErrBadInput, nil, api.CodeBadInput},
	{evolve.ErrSchemaMismatch, nil, api.CodeBadInput},
	{evolve.ErrUnsupportedSchema, nil, api.CodeUnsupportedSchema},
	{expr.ErrBadPredicate, nil, api.CodeBadRequest},
	{format.ErrBadName, nil, api.CodeBadRequest},
	{expr.ErrBadColumns, nil, api.CodeBadRequest},
	{expr.ErrBadAssignment, nil, api.CodeBadRequest},
	{table.ErrBadAsOf, nil, api.CodeBadRequest},
	{commit.ErrBadClauses, nil, api.CodeBadRequest},
	{evolve.ErrReservedName, nil, api.CodeBadRequest},
	{evolve.ErrBadSchemaChange, nil, api.CodeBadRequest},
	{commit.ErrClusteredIndex, nil, api.CodeBadRequest},
	{blob.ErrBadURL, nil, api.CodeBadRequest},
	{wal.ErrBadShardID, nil, api.CodeBadRequest},
	{layout.ErrBadLocation, nil, api.CodeBadRequest},
	{layout.ErrLocationMismatch, nil, api.CodeBadRequest},
	{layout.ErrUnsupported, nil, api.CodeUnsupportedSchema},
	{commit.ErrInvalidOptions, nil, api.CodeBadRequest},
	{wal.ErrInvalidOptions, nil, api.CodeBadRequest},
	{compactor.ErrInvalidOptions, nil, api.CodeBadRequest},
	{layout.ErrInvalidOptions, nil, api.CodeBadRequest},
	{ErrInvalidOptions, nil, api.CodeBadRequest},
	// Busy: another run of the same work holds the table.
	{walshard.ErrMergeRunning, nil, api.CodeBusy},
	{ErrMergeRunning, nil, api.CodeMergeRunning},
	{ErrCompactionRunning, nil, api.CodeCompactionRunning},
	{compactor.ErrLeaseHeld, nil, api.CodeLeaseHeld},
	{nil, typed[*compactor.LeaseHeldError](), api.CodeLeaseHeld},
	// Gone: a table dropped under a writer answers as a missing table.
	{walshard.ErrDropped, nil, api.CodeNotFound},
	// The rows may have been stored: sent again, they may be stored twice.
	{walshard.ErrAppendUnknown, nil, api.CodeOutcomeUnknown},
	{commit.ErrOutcomeUnknown, nil, api.CodeOutcomeUnknown},
	// Worth sending again: the writer reopens, the store recovers.
	{walshard.ErrSchemaChanged, nil, api.CodeUnavailable},
	{walshard.ErrFenced, nil, api.CodeUnavailable},
	{walshard.ErrClosed, nil, api.CodeUnavailable},
	{ErrClosed, nil, api.CodeUnavailable},
	{walshard.ErrFleetMoving, nil, api.CodeUnavailable},
	{blob.ErrRetryable, nil, api.CodeStoreUnavailable},
	// An object holding acknowledged rows gone or damaged, until an
	// operator puts it back or repairs (not worth sending again).
	{format.ErrMissingData, nil, api.CodeDataMissing},
	{compactor.ErrMissingData, nil, api.CodeDataMissing},
	{walshard.ErrMissingEntry, nil, api.CodeDataMissing},
	{wal.ErrCorruptEntry, nil, api.CodeDataMissing},
	{wal.ErrPoisonEntry, nil, api.CodeDataMissing},
	{format.ErrCorrupt, nil, api.CodeDataMissing},
	// A newer build's table: an upgraded strata reads (and writes) it.
	{format.ErrUnsupportedFormat, nil, api.CodeUnsupportedFormat},
}

// Code is the code of err (api.Code*): the first of ErrorCodes that
// matches it, CodeInternal when none does, "" for nil. The server
// answers with it and the CLI exits by it, so that one error reads the
// same everywhere.
func Code(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range ErrorCodes {
		if c.Err != nil && errors.Is(err, c.Err) || c.Err == nil && c.As(err) {
			return c.Code
		}
	}
	return api.CodeInternal
}

// Exit statuses of the CLI, one per kind of outcome (the README's table):
// a script tells a mistake in its command (2), in its rows (4), a missing
// or existing table (5, 6), and a write that may have been stored (3)
// from a failure that trying again later may cure (1).
const (
	ExitOK           = 0
	ExitFailed       = 1 // the store, a conflict, a lease, damaged data: see the message
	ExitUsage        = 2 // the command line: a flag, a filter, an assignment, a time, a URL, a name
	ExitUnknown      = 3 // a write whose outcome is unknown: its rows may be stored
	ExitInputRefused = 4 // rows, a file or a schema that do not fit: nothing was written
	ExitNotFound     = 5 // no such table, version, tag, shard or consumer
	ExitExists       = 6 // the table or tag is there already
)

// ExitCode is the CLI's exit status for err, by its code (Code).
func ExitCode(err error) int {
	switch Code(err) {
	case "":
		return ExitOK
	case api.CodeOutcomeUnknown:
		return ExitUnknown
	case api.CodeBadRequest, api.CodeBadTableName:
		return ExitUsage
	case api.CodeBadInput, api.CodeUnsupportedSchema, api.CodeTooLarge, api.CodeKeyReused:
		return ExitInputRefused
	case api.CodeNotFound, api.CodeVersionCollected:
		return ExitNotFound
	case api.CodeExists, api.CodeBadPlacement:
		return ExitExists
	}
	return ExitFailed
}
