package engine_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/internal/ipcguard"
	"github.com/stratadb/strata/lakehouse/layout"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/walshard"
	"github.com/stratadb/strata/walshard/wal"
)

// sentinels is every exported sentinel error (a package-level Err…) of
// the engine and the packages it is made of, by "package.Name", with the
// code a caller meets it by: engine.Code of it wrapped, the server's
// answer and the CLI's exit. CodeInternal ones never reach a caller
// alone (always wrapped in an error of another kind, or a program's own
// fault), or have no kind of their own yet.
var sentinels = map[string]struct {
	err  error
	code string
}{
	"format.ErrKeyReused":         {format.ErrKeyReused, api.CodeKeyReused},
	"format.ErrSequenceExpired":   {format.ErrSequenceExpired, api.CodeSequenceExpired},
	"format.ErrBadIdempotency":    {format.ErrBadIdempotency, api.CodeBadRequest},
	"format.ErrNotFound":          {format.ErrNotFound, api.CodeNotFound},
	"format.ErrVersionNotFound":   {format.ErrVersionNotFound, api.CodeNotFound},
	"format.ErrTagNotFound":       {format.ErrTagNotFound, api.CodeNotFound},
	"format.ErrExists":            {format.ErrExists, api.CodeExists},
	"format.ErrTagExists":         {format.ErrTagExists, api.CodeExists},
	"format.ErrPlacement":         {format.ErrPlacement, api.CodeBadPlacement},
	"evolve.ErrBadInput":          {evolve.ErrBadInput, api.CodeBadInput},
	"evolve.ErrSchemaMismatch":    {evolve.ErrSchemaMismatch, api.CodeBadInput},
	"evolve.ErrUnsupportedSchema": {evolve.ErrUnsupportedSchema, api.CodeUnsupportedSchema},
	"expr.ErrBadPredicate":        {expr.ErrBadPredicate, api.CodeBadRequest},
	"format.ErrBadName":           {format.ErrBadName, api.CodeBadRequest},
	"expr.ErrBadColumns":          {expr.ErrBadColumns, api.CodeBadRequest},
	"expr.ErrBadAssignment":       {expr.ErrBadAssignment, api.CodeBadRequest},
	"table.ErrBadAsOf":            {table.ErrBadAsOf, api.CodeBadRequest},
	"commit.ErrBadClauses":        {commit.ErrBadClauses, api.CodeBadRequest},
	"evolve.ErrReservedName":      {evolve.ErrReservedName, api.CodeBadRequest},
	"evolve.ErrBadSchemaChange":   {evolve.ErrBadSchemaChange, api.CodeBadRequest},
	"commit.ErrClusteredIndex":    {commit.ErrClusteredIndex, api.CodeBadRequest},
	"format.ErrMissingData":       {format.ErrMissingData, api.CodeDataMissing},
	"format.ErrCorrupt":           {format.ErrCorrupt, api.CodeDataMissing},
	"table.ErrNotCopyable":        {table.ErrNotCopyable, api.CodeInternal}, // compaction decodes instead
	"format.ErrNamedMoved":        {format.ErrNamedMoved, api.CodeInternal}, // a merge plans again
	"format.ErrUnsupportedFormat": {format.ErrUnsupportedFormat, api.CodeUnsupportedFormat},
	"commit.ErrConflict":          {commit.ErrConflict, api.CodeConflict},
	"engine.ErrCopyDiverged":      {engine.ErrCopyDiverged, api.CodeConflict},
	"engine.ErrCopyBehind":        {engine.ErrCopyBehind, api.CodeVersionCollected},
	"commit.ErrOutcomeUnknown":    {commit.ErrOutcomeUnknown, api.CodeOutcomeUnknown},
	"commit.ErrInvalidOptions":    {commit.ErrInvalidOptions, api.CodeBadRequest},
	"commit.ErrBudget":            {commit.ErrBudget, api.CodeInternal}, // no code yet
	"walshard.ErrUnknownShard":    {walshard.ErrUnknownShard, api.CodeNotFound},
	"wal.ErrBadShardID":           {wal.ErrBadShardID, api.CodeBadRequest},
	"wal.ErrInvalidOptions":       {wal.ErrInvalidOptions, api.CodeBadRequest},
	"walshard.ErrMergeRunning":    {walshard.ErrMergeRunning, api.CodeBusy},
	"walshard.ErrDropped":         {walshard.ErrDropped, api.CodeNotFound},
	"walshard.ErrAppendUnknown":   {walshard.ErrAppendUnknown, api.CodeOutcomeUnknown},
	"walshard.ErrSchemaChanged":   {walshard.ErrSchemaChanged, api.CodeUnavailable},
	"walshard.ErrFenced":          {walshard.ErrFenced, api.CodeUnavailable},
	"walshard.ErrClosed":          {walshard.ErrClosed, api.CodeUnavailable},
	"walshard.ErrFleetMoving":     {walshard.ErrFleetMoving, api.CodeUnavailable},
	"walshard.ErrMissingEntry":    {walshard.ErrMissingEntry, api.CodeDataMissing},
	"wal.ErrCorruptEntry":         {wal.ErrCorruptEntry, api.CodeDataMissing},
	"wal.ErrPoisonEntry":          {wal.ErrPoisonEntry, api.CodeDataMissing},
	"compactor.ErrInvalidOptions": {compactor.ErrInvalidOptions, api.CodeBadRequest},
	"compactor.ErrLeaseHeld":      {compactor.ErrLeaseHeld, api.CodeLeaseHeld},
	"compactor.ErrMissingData":    {compactor.ErrMissingData, api.CodeDataMissing},
	"compactor.ErrRowsChanged":    {compactor.ErrRowsChanged, api.CodeInternal}, // a compaction's own check failed
	"blob.ErrBadURL":              {blob.ErrBadURL, api.CodeBadRequest},
	"blob.ErrRetryable":           {blob.ErrRetryable, api.CodeStoreUnavailable},
	"blob.ErrNotFound":            {blob.ErrNotFound, api.CodeInternal},            // the engine says which object was missing, as table.ErrMissingData
	"blob.ErrExists":              {blob.ErrExists, api.CodeInternal},              // a lost conditional create, which the engine handles
	"blob.ErrPermanent":           {blob.ErrPermanent, api.CodeInternal},           // the store refused for good
	"blob.ErrNoConditionalWrites": {blob.ErrNoConditionalWrites, api.CodeInternal}, // the store cannot hold a table
	"blob.ErrTooManyRacers":       {blob.ErrTooManyRacers, api.CodeInternal},       // the self-test's own option
	"engine.ErrInvalidOptions":    {engine.ErrInvalidOptions, api.CodeBadRequest},
	"engine.ErrMergeRunning":      {engine.ErrMergeRunning, api.CodeMergeRunning},
	"engine.ErrCompactionRunning": {engine.ErrCompactionRunning, api.CodeCompactionRunning},
	"engine.ErrClosed":            {engine.ErrClosed, api.CodeUnavailable},
	"engine.ErrNoShard":           {engine.ErrNoShard, api.CodeInternal}, // a program's own fault
	"layout.ErrInvalidOptions":    {layout.ErrInvalidOptions, api.CodeBadRequest},
	"layout.ErrLocationMismatch":  {layout.ErrLocationMismatch, api.CodeBadRequest},
	"layout.ErrUnsupported":       {layout.ErrUnsupported, api.CodeUnsupportedSchema},
	"layout.ErrBadLocation":       {layout.ErrBadLocation, api.CodeBadRequest},
	"ingest.ErrTooLarge":          {ingest.ErrTooLarge, api.CodeTooLarge},
	"ipcguard.ErrRefused":         {ipcguard.ErrRefused, api.CodeInternal}, // always an input error's reason
	"wal.ErrTookInLanded":         {wal.ErrTookInLanded, api.CodeInternal}, // the shard's own: the entry goes to the next position
	"wal.ErrStateTaken":           {wal.ErrStateTaken, api.CodeInternal},   // the shard's own: it reads the new state and answers ErrFenced or retries
	"wal.ErrStaleBase":            {wal.ErrStaleBase, api.CodeInternal},    // the shard's own: it reads the table again
	"wal.ErrStateGone":            {wal.ErrStateGone, api.CodeInternal},    // the shard reads the table again; it reaches a caller only after a hundred tries, naming the object
	"commit.ErrPlanAgain":         {commit.ErrPlanAgain, api.CodeInternal}, // always beside the error that made a plan stale, which the driver acts on
}

// The engine's packages, whose sentinels sentinels must name, each.
var sentinelPackages = []string{"table", "table/evolve", "table/format", "table/expr", "table/fragment", "commit", "walshard", "walshard/wal", "walshard/fleetmerge", "compactor", "blob", "engine", "lakehouse", "lakehouse/layout", "internal/ingest", "internal/ipcguard"}

// Every sentinel of the engine's packages has its code, and engine.Code
// gives it to the sentinel wrapped as a verb wraps it; a new sentinel
// fails here until it is given one. The typed errors give their codes
// too, and a sentinel's code is never that of an earlier entry that
// happens to match it.
func TestEverySentinelHasItsCode(t *testing.T) {
	var found []string
	for _, dir := range sentinelPackages {
		found = append(found, sentinelsIn(t, filepath.Join("..", dir))...)
	}
	for _, name := range found {
		if _, ok := sentinels[name]; !ok {
			t.Errorf("%s has no code: add it to engine.ErrorCodes (or, if it never reaches a caller alone, to this test's list as CodeInternal)", name)
		}
	}
	for name, s := range sentinels {
		if !slices.Contains(found, name) {
			t.Errorf("%s is listed here but not declared in %v", name, sentinelPackages)
		}
		if got := engine.Code(fmt.Errorf("verb: %w", s.err)); got != s.code {
			t.Errorf("engine.Code(%s) = %q, want %q", name, got, s.code)
		}
		if got, want := engine.ExitCode(fmt.Errorf("verb: %w", s.err)), exitFor(s.code); got != want {
			t.Errorf("engine.ExitCode(%s) = %d, want %d", name, got, want)
		}
	}
	typed := []struct {
		err  error
		code string
	}{
		{&format.ChangesCollectedError{}, api.CodeVersionCollected},
		{&compactor.LeaseHeldError{Holder: "other"}, api.CodeLeaseHeld},
		{&format.CorruptError{Key: "k", Reason: "r", Err: errors.New("x")}, api.CodeDataMissing},
		{errors.New("something else"), api.CodeInternal},
	}
	for _, c := range typed {
		if got := engine.Code(fmt.Errorf("verb: %w", c.err)); got != c.code {
			t.Errorf("engine.Code(%T) = %q, want %q", c.err, got, c.code)
		}
	}
	if engine.Code(nil) != "" || engine.ExitCode(nil) != 0 {
		t.Error("nil has a code")
	}
	for _, c := range engine.ErrorCodes {
		if api.Status(c.Code) == 500 && c.Code != api.CodeInternal && c.Code != api.CodeDataMissing {
			t.Errorf("code %q has no status of its own", c.Code)
		}
	}
}

// exitFor is the CLI's exit status for an error of code.
// exitFor is the exit status of the README's table for code.
func exitFor(code string) int {
	switch code {
	case api.CodeOutcomeUnknown:
		return 3
	case api.CodeBadRequest, api.CodeBadTableName:
		return 2
	case api.CodeBadInput, api.CodeUnsupportedSchema, api.CodeTooLarge, api.CodeKeyReused:
		return 4
	case api.CodeNotFound, api.CodeVersionCollected:
		return 5
	case api.CodeExists, api.CodeBadPlacement:
		return 6
	}
	return 1
}

// sentinelsIn returns the package-level ErrX… variables declared
// in the non-test files of dir, as "package.Name"; one that names another
// package's (engine.ErrConflict = commit.ErrConflict) is that one.
func sentinelsIn(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) && f.Name.Name == "engine" {
						if _, ok := vs.Values[i].(*ast.SelectorExpr); ok {
							continue // another package's sentinel under the engine's name: the same value
						}
					}
					if len(n.Name) > 3 && strings.HasPrefix(n.Name, "Err") && unicode.IsUpper(rune(n.Name[3])) {
						out = append(out, f.Name.Name+"."+n.Name)
					}
				}
			}
		}
	}
	return out
}

// Code is called by every request at once: classifying typed errors from
// many goroutines shares nothing (under the race detector, a target that
// ErrorCodes held once was written by each errors.As that matched).
func TestCodeIsSafeFromManyGoroutines(t *testing.T) {
	errs := []error{
		fmt.Errorf("scan: %w", &format.ChangesCollectedError{}),
		fmt.Errorf("compact: %w", &compactor.LeaseHeldError{Holder: "other"}),
	}
	want := []string{api.CodeVersionCollected, api.CodeLeaseHeld}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 200 {
				if got := engine.Code(errs[i%2]); got != want[i%2] {
					t.Errorf("engine.Code(%v) = %q, want %q", errs[i%2], got, want[i%2])
					return
				}
			}
		})
	}
	wg.Wait()
}
