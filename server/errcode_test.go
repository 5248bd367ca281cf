package server

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/walshard"
)

// Every error the engine gives a code is answered with that code and the
// status api.Status names for it, wrapped as a verb wraps it: the server
// classifies no error of the engine by itself. A write whose outcome is
// unknown (commit.ErrOutcomeUnknown) answers outcome_unknown, 503; before,
// it had no case here and answered 500 internal.
func TestTheServerAnswersEveryErrorByItsCode(t *testing.T) {
	for _, c := range engine.ErrorCodes {
		err := c.Err
		if err == nil {
			continue // a typed error: engine's own test covers it
		}
		rec := httptest.NewRecorder()
		fail(rec, fmt.Errorf("verb: %w", err))
		var body api.ErrorBody
		if jerr := json.Unmarshal(rec.Body.Bytes(), &body); jerr != nil {
			t.Fatalf("%v: %v", err, jerr)
		}
		want := c.Code
		if err == walshard.ErrSchemaChanged {
			want = api.CodeUnavailable
		}
		if rec.Code != api.Status(want) || body.Error.Code != engine.Code(err) {
			t.Errorf("%v: answered %d %q, want %d %q", err, rec.Code, body.Error.Code, api.Status(want), engine.Code(err))
		}
	}
}
