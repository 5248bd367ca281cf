package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

func (s *Server) versions(w http.ResponseWriter, r *http.Request, t *tableState) error {
	limit, _ := intQuery(r, "limit")
	detail := r.URL.Query().Get("detail") == "true"
	vs, err := table.Versions(r.Context(), t.b, int(limit), detail)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiVersions(vs))
	return nil
}

func (s *Server) tags(w http.ResponseWriter, r *http.Request, t *tableState) error {
	if _, err := table.LatestVersion(r.Context(), t.b); err != nil {
		return err
	}
	tags, err := table.Tags(r.Context(), t.b)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiTags(tags))
	return nil
}

func (s *Server) createTag(w http.ResponseWriter, r *http.Request, t *tableState) error {
	var req api.TagRequest
	if err := jsonBody(r); err != nil {
		return err
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return badRequestOrLimit(err, "body is not a tag")
	}
	if req.Version == 0 {
		var err error
		if req.Version, err = table.LatestVersion(r.Context(), t.b); err != nil {
			return err
		}
	}
	if err := table.CreateTag(r.Context(), t.b, req.Name, req.Version); err != nil {
		if errors.Is(err, format.ErrTagExists) || errors.Is(err, format.ErrVersionNotFound) {
			return err
		}
		return badRequest("%v", err)
	}
	tag, err := table.ReadTag(r.Context(), t.b, req.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, apiTag(tag))
	return nil
}

// deleteTag removes a tag: 204, or 404 when there is none.
func (s *Server) deleteTag(w http.ResponseWriter, r *http.Request, t *tableState) error {
	if err := table.DeleteTag(r.Context(), t.b, r.PathValue("tag")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// restore answers POST …/restore {"version": N}, {"tag": T} or
// {"as_of": TIME}: a new
// version whose rows are version N's (engine.DB.Restore); 404 when the
// version or tag does not exist (or garbage collection took the version).
func (s *Server) restore(w http.ResponseWriter, r *http.Request, t *tableState) error {
	var req api.RestoreRequest
	if err := jsonBody(r); err != nil {
		return err
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return badRequestOrLimit(err, "body is not a restore request: want {\"version\": N}, {\"tag\": T} or {\"as_of\": TIME}")
	}
	if dec.More() {
		return badRequest("body is not a restore request: more than one JSON value")
	}
	given := 0
	for _, g := range []bool{req.Version != 0, req.Tag != "", req.AsOf != ""} {
		if g {
			given++
		}
	}
	if given != 1 {
		return badRequest("a restore names one of version, tag and as_of")
	}
	switch {
	case req.Tag != "":
		tag, err := table.ReadTag(r.Context(), t.b, req.Tag)
		if err != nil {
			return err
		}
		req.Version = tag.Version
	case req.AsOf != "":
		at, err := table.ParseAsOf(req.AsOf, time.Now())
		if err != nil {
			return badRequest("as_of: %v", err)
		}
		m, err := table.VersionAsOf(r.Context(), t.b, at)
		if err != nil {
			return err
		}
		req.Version = m.Version
	}
	res, err := t.db.Restore(r.Context(), req.Version)
	if err != nil {
		return err
	}
	// This server's shard takes rows under the restored schema from now
	// on: a column the restore took away is refused by name. (Should the
	// read fail, the shard's own check of the schema finds the change.)
	if _, err := t.db.RenewSchema(r.Context()); err != nil {
		s.opts.Log.Warn("renewing the shard's schema after a restore", "table", t.name, "error", err)
	}
	writeJSON(w, http.StatusOK, api.RestoreResult{Version: res.Version, Restored: req.Version, Rows: res.Manifest.Rows()})
	return nil
}
