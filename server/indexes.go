package server

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/table"
)

func (s *Server) indexes(w http.ResponseWriter, r *http.Request, t *tableState) error {
	m, err := table.ReadLatest(r.Context(), t.b)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.IndexList{Indexes: apiIndexes(m.Indexes)})
	return nil
}

// createIndex builds a key index of an int64 column (take by key reads it
// after compactions without a scan) and answers 201 with it; building
// reads the column of every fragment.
func (s *Server) createIndex(w http.ResponseWriter, r *http.Request, t *tableState) error {
	if err := jsonBody(r); err != nil {
		return err
	}
	var req api.IndexRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Column == "" {
		return badRequest("body must be {\"column\": NAME}")
	}
	res, err := t.db.CreateIndex(r.Context(), req.Column)
	if err != nil {
		return err
	}
	ix := res.Manifest.Transaction.Index
	if ix == nil {
		return fmt.Errorf("server: the index commit carries no index")
	}
	writeJSON(w, http.StatusCreated, apiIndex(*ix))
	return nil
}
