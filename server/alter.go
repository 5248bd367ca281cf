package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/table/evolve"
)

// alterTable is POST /api/v1/tables/{name}/schema: column changes, or the
// cluster key, in one commit (see engine.DB.Alter); it answers the table
// as it is after.
func (s *Server) alterTable(w http.ResponseWriter, r *http.Request, t *tableState) error {
	if err := jsonBody(r); err != nil {
		return err
	}
	var req api.AlterRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return badRequestOrLimit(err, `body must be {"changes": [{"op": "add", "column": NAME, "type": TYPE}, …]}`)
	}
	if len(req.Changes) == 0 {
		return badRequest("no change given: changes holds {op, column, to, type, nullable} objects, or {op: cluster_by, columns}")
	}
	changes := make([]evolve.ColumnChange, len(req.Changes))
	for i, c := range req.Changes {
		if c.Op == string(evolve.ClusterBy) && c.Columns == nil {
			return badRequest(`change %d: cluster_by takes "columns": [...] ([] clears the key)`, i)
		}
		typ, err := c.ArrowType()
		if err != nil {
			return badRequest("change %d: %v", i, err)
		}
		changes[i] = evolve.ColumnChange{Op: evolve.ChangeOp(c.Op), Column: c.Column, To: c.To, Type: typ, Nullable: c.Nullable, Columns: c.Columns}
	}
	res, err := t.db.Alter(r.Context(), changes...)
	if errors.Is(err, evolve.ErrBadSchemaChange) {
		return badRequest("%v", err)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, info(t.name, res.Manifest))
	return nil
}
