package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/engine"
)

// optionalBody decodes r's JSON body, when it has one, into v: one object
// of the fields v names (what says what it is, for an error); no body
// leaves v as it is.
func optionalBody(r *http.Request, v any, what string) error {
	if r.ContentLength == 0 {
		return nil
	}
	if err := jsonBody(r); err != nil {
		return err
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return badRequestOrLimit(err, "body is not "+what)
	}
	if dec.More() {
		return badRequest("body is not %s: more than one JSON value", what)
	}
	return nil
}

// compact starts a compaction of the base table under the table's lease and
// answers 202 with a Location to the stats; 409 when another compactor
// holds the lease (naming it) or the policy says not now.
func (s *Server) compact(w http.ResponseWriter, r *http.Request, t *tableState) error {
	var req api.CompactRequest
	if err := optionalBody(r, &req, "a compaction request"); err != nil {
		return err
	}
	if req.MinFragments < 0 || req.TargetRows < 0 || req.TargetBytes < 0 {
		return badRequest("min_fragments, target_rows and target_bytes must not be negative")
	}
	p := s.opts.Compaction
	if req.TargetRows > 0 {
		p.TargetRows = req.TargetRows
	}
	if req.TargetBytes > 0 {
		p.TargetBytes = req.TargetBytes
	}
	minGiven := req.MinFragments > 0
	if minGiven {
		p.MinFragments = req.MinFragments
	} else {
		p.MinFragments = 1 // an operator asked
	}
	if req.Force {
		p.QuietWindows = nil
	}
	look, err := t.db.PlanCompaction(r.Context(), &p)
	if err != nil {
		return err
	}
	if !look.Due && (minGiven || len(p.QuietWindows) > 0) {
		return &apiError{http.StatusConflict, api.CodeNotDue, "compaction not due: " + look.Why}
	}
	if req.DryRun {
		m, plan := look.Manifest, look.Plan
		after := len(m.Fragments) - plan.Sources() + plan.Outputs()
		writeJSON(w, http.StatusOK, api.CompactPlan{Version: m.Version, Bins: len(plan.Bins), FragmentsBefore: len(m.Fragments),
			FragmentsAfter: after, Plan: strings.TrimSpace(plan.String())})
		return nil
	}
	// The run plans first against the version just read: no second read.
	err = t.db.CompactInBackground(r.Context(), engine.CompactOptions{Policy: &p, Tune: engine.CompactTune{Base: look.Manifest}})
	var held *engine.LeaseHeldError
	switch {
	case errors.Is(err, engine.ErrCompactionRunning):
		return &apiError{http.StatusConflict, api.CodeCompactionRunning, "a compaction of this table by this server is already running"}
	case errors.As(err, &held):
		return &apiError{http.StatusConflict, api.CodeLeaseHeld, fmt.Sprintf("another compactor holds the table's lease: %s, until %s",
			held.Holder, held.Expires.UTC().Format(time.RFC3339))}
	case err != nil:
		return err
	}
	w.Header().Set("Location", "/api/v1/tables/"+t.name+"/compact/stats")
	w.WriteHeader(http.StatusAccepted)
	return nil
}

func (s *Server) compactStats(w http.ResponseWriter, r *http.Request, t *tableState) error {
	// The history first, then the table: a run is recorded after its
	// commit, so the fragment count is never older than the history.
	st, err := t.db.History(r.Context(), 20)
	if err != nil {
		return err
	}
	look, err := t.db.PlanCompaction(r.Context(), &s.opts.Compaction)
	if err != nil {
		return err
	}
	m, now := look.Manifest, time.Now()
	out := api.CompactStats{Fragments: len(m.Fragments), Running: t.db.Compacting(), TotalCompactions: st.TotalCompactions,
		TotalAdopted: st.TotalAdopted, Runs: apiKindRuns(st.Kinds), History: apiRuns(st.History), SkippedRecords: st.Skipped}
	lease, held, err := t.db.Lease(r.Context(), now)
	if err != nil {
		return err
	}
	if held {
		out.Running, out.Holder, out.LeaseExpires = true, &lease.Holder, &lease.Expires
	}
	out.Due, out.DueReason = look.Due, look.Why
	if !st.LastCompaction.IsZero() {
		out.LastCompaction = &st.LastCompaction
	}
	if st.LastError != "" {
		out.LastError, out.LastErrorAt = &st.LastError, &st.LastErrorAt
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
