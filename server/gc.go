package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/engine"
)

// gc answers POST …/gc {"keep_versions", "retain", "safety_age",
// "dry_run"} (every field optional): a garbage collection of the table
// with the collector's safety rules (engine.DB.GC) — the newest versions,
// those younger than retain, tagged versions and what named consumers have
// not read are kept; unreferenced objects younger than safety_age too.
func (s *Server) gc(w http.ResponseWriter, r *http.Request, t *tableState) error {
	var req api.GCRequest
	if err := optionalBody(r, &req, "a collection request"); err != nil {
		return err
	}
	if req.KeepVersions != nil && *req.KeepVersions < 1 {
		return badRequest("keep_versions is %d: at least 1 (the newest version is always kept); leave it out for the default, 10", *req.KeepVersions)
	}
	p := t.db.GCPolicy() // the table's, with what the request sets
	p.DryRun = req.DryRun
	if req.KeepVersions != nil {
		p.KeepVersions = *req.KeepVersions
	}
	for _, d := range []struct {
		name, text string
		to         *time.Duration
	}{{"retain", req.Retain, &p.RetainFor}, {"safety_age", req.SafetyAge, &p.SafetyAge}} {
		if d.text == "" {
			continue
		}
		v, err := time.ParseDuration(d.text)
		if err != nil {
			return badRequest("%s: %q is not a duration: write it as 30m, 168h or 1h30m", d.name, d.text)
		}
		if v < engine.MinRetain {
			return badRequest("%s: %s is below the floor of %s, which keeps a commit in flight safe", d.name, v, engine.MinRetain)
		}
		*d.to = v
	}
	res, err := t.db.GC(r.Context(), engine.GCOptions{Policy: &p})
	if err != nil {
		return err
	}
	out := api.GCResult{Boundary: res.Boundary, VersionsKept: res.VersionsKept, VersionsDeleted: len(res.VersionsDeleted),
		ObjectsDeleted: len(res.ObjectsDeleted), BytesFreed: res.BytesFreed, DryRun: req.DryRun}
	if req.DryRun {
		out.Plan = strings.TrimSpace(res.Plan.String())
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
