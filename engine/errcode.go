package engine

import (
	"errors"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/lakehouse"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

// ErrorCode is one kind of error a table's verbs return, and the code
// every caller gives it: the server answers it with the code and the
// status api.Status names, the CLI exits with its exit code (ExitCode).
// Err matches with errors.Is, or errors.As when Err is a pointer to a
// typed error's pointer (new(*table.CorruptError)).
type ErrorCode struct {
	Err  any
	Code string // an api.Code*
}

// ErrorCodes are the engine's errors and their codes, in the order Code
// tries them: the first that matches gives the code. A sentinel of the
// engine's packages that is not here is CodeInternal, and a test says so
// (every sentinel is listed here or among those that never reach a
// caller).
var ErrorCodes = []ErrorCode{
	// A request's name used again, for another body or too late.
	{table.ErrKeyReused, api.CodeKeyReused},
	{table.ErrSequenceExpired, api.CodeSequenceExpired},
	{table.ErrBadIdempotency, api.CodeBadRequest},
	{new(*table.ChangesCollectedError), api.CodeVersionCollected},
	// What is not there, or is already.
	{table.ErrNotFound, api.CodeNotFound},
	{walshard.ErrUnknownShard, api.CodeNotFound},
	{table.ErrVersionNotFound, api.CodeNotFound},
	{table.ErrTagNotFound, api.CodeNotFound},
	{table.ErrExists, api.CodeExists},
	{table.ErrTagExists, api.CodeExists},
	{commit.ErrConflict, api.CodeConflict},
	{table.ErrPlacement, api.CodeBadPlacement},
	{ingest.ErrTooLarge, api.CodeTooLarge},
	// Bad input: rows, schemas, words of a request, options.
	{table.ErrBadInput, api.CodeBadInput},
	{table.ErrSchemaMismatch, api.CodeBadInput},
	{table.ErrUnsupportedSchema, api.CodeUnsupportedSchema},
	{table.ErrBadPredicate, api.CodeBadRequest},
	{table.ErrBadName, api.CodeBadRequest},
	{table.ErrBadColumns, api.CodeBadRequest},
	{table.ErrBadAssignment, api.CodeBadRequest},
	{table.ErrReservedName, api.CodeBadRequest},
	{table.ErrBadSchemaChange, api.CodeBadRequest},
	{blob.ErrBadURL, api.CodeBadRequest},
	{walshard.ErrBadShardID, api.CodeBadRequest},
	{layout.ErrBadLocation, api.CodeBadRequest},
	{lakehouse.ErrLocationMismatch, api.CodeBadRequest},
	{lakehouse.ErrUnsupported, api.CodeUnsupportedSchema},
	{commit.ErrInvalidOptions, api.CodeBadRequest},
	{walshard.ErrInvalidOptions, api.CodeBadRequest},
	{compactor.ErrInvalidOptions, api.CodeBadRequest},
	{lakehouse.ErrInvalidOptions, api.CodeBadRequest},
	{ErrInvalidOptions, api.CodeBadRequest},
	// Busy: another run of the same work holds the table.
	{walshard.ErrMergeRunning, api.CodeBusy},
	{ErrMergeRunning, api.CodeMergeRunning},
	{ErrCompactionRunning, api.CodeCompactionRunning},
	{compactor.ErrLeaseHeld, api.CodeLeaseHeld},
	{new(*compactor.LeaseHeldError), api.CodeLeaseHeld},
	// Gone: a table dropped under a writer answers as a missing table.
	{walshard.ErrDropped, api.CodeNotFound},
	// The rows may have been stored: sent again, they may be stored twice.
	{walshard.ErrAppendUnknown, api.CodeOutcomeUnknown},
	{commit.ErrOutcomeUnknown, api.CodeOutcomeUnknown},
	// Worth sending again: the writer reopens, the store recovers.
	{walshard.ErrSchemaChanged, api.CodeUnavailable},
	{walshard.ErrFenced, api.CodeUnavailable},
	{walshard.ErrClosed, api.CodeUnavailable},
	{ErrClosed, api.CodeUnavailable},
	{walshard.ErrFleetMoving, api.CodeUnavailable},
	{blob.ErrRetryable, api.CodeStoreUnavailable},
	// An object holding acknowledged rows gone or damaged, until an
	// operator puts it back or repairs (not worth sending again).
	{table.ErrMissingData, api.CodeDataMissing},
	{compactor.ErrMissingData, api.CodeDataMissing},
	{walshard.ErrMissingEntry, api.CodeDataMissing},
	{walshard.ErrCorruptEntry, api.CodeDataMissing},
	{walshard.ErrPoisonEntry, api.CodeDataMissing},
	{table.ErrCorrupt, api.CodeDataMissing},
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
		if matches(err, c.Err) {
			return c.Code
		}
	}
	return api.CodeInternal
}

// matches tells whether err is target: a sentinel by errors.Is, a
// pointer to a typed error's pointer by errors.As.
func matches(err error, target any) bool {
	if e, ok := target.(error); ok {
		return errors.Is(err, e)
	}
	return errors.As(err, target)
}

// ExitCode is the CLI's exit status for err: 0 for nil, 3 when a write's
// outcome is unknown (its rows may be stored: a script that sends them
// again could store them twice), 1 otherwise. Usage errors, which the
// CLI knows before any verb runs, exit 2.
func ExitCode(err error) int {
	switch Code(err) {
	case "":
		return 0
	case api.CodeOutcomeUnknown:
		return 3
	}
	return 1
}
