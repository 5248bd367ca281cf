package server

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/changes"
)

// groupChanges answers GET …/changes?group=G&member=M[&ack=SHARE][&wait=D]
// [&lease=D]: member M's share of consumer group G's changes
// (changes.ReadGroupShare), each row with _change, _version and _unit, as
// Arrow or JSON lines. The Strata-Group-Ack header is the share the
// answer covers: the member sends it back as ack= with its next request,
// once done with the rows, and the group records it then; an answer cut
// short is not acknowledged, and its units come again. A member renews
// its claim with each request: one that asks no more for lease= (60s by
// default) loses its partitions to the others. DELETE
// …/groups/{group}/members/{member} gives them back at once.
func (s *Server) groupChanges(w http.ResponseWriter, r *http.Request, t *tableState) error {
	q := r.URL.Query()
	for _, p := range []string{"from_as_of", "consumer", "to", "to_as_of", "limit"} {
		if q.Has(p) {
			return badRequest("%s= is not for a group's member, whose share starts at its partitions' positions and ends at the latest version", p)
		}
	}
	group, member := q.Get("group"), q.Get("member")
	if member == "" {
		return badRequest("group= needs member=NAME")
	}
	co, err := changesOptions(r)
	if err != nil {
		return err
	}
	opts := changes.GroupOptions{Lease: time.Minute, ChangesOptions: co}
	if v := q.Get("lease"); v != "" {
		if opts.Lease, err = time.ParseDuration(v); err != nil || opts.Lease < time.Second || opts.Lease > time.Hour {
			return badRequest("lease=%q: want a duration from 1s to 1h", v)
		}
	}
	if v := q.Get("from"); v != "" { // where a group made by this read starts
		if opts.From, err = strconv.ParseUint(v, 10, 64); err != nil {
			return badRequest("from=%q: want a version (0: the table's creation)", v)
		}
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		if wait, err = time.ParseDuration(v); err != nil || wait < 0 {
			return badRequest("wait=%q: want a duration such as 30s", v)
		}
		wait = min(wait, maxChangesWait, opts.Lease/2)
	}
	var done *changes.GroupShare
	if v := q.Get("ack"); v != "" {
		share, err := changes.ParseGroupShare(v)
		if err != nil {
			return badRequest("ack=: %v", err)
		}
		if share.Through == 0 {
			return badRequest("ack=%q: a share through no version", v)
		}
		done = &share
	}
	gr, err := changes.ReadGroupShare(r.Context(), t.b, group, member, opts, done, wait)
	if errors.Is(err, changes.ErrBadShare) {
		return badRequest("ack=: %v", err)
	}
	if err != nil {
		return err
	}
	// Every version's rows in the schema of the last one the answer
	// covers (the latest when nothing is new).
	to := gr.Share.Through
	if to == 0 {
		if to, err = table.LatestVersion(r.Context(), t.b); err != nil {
			return err
		}
	}
	schema, release, err := s.changesAnswer(r, t, to, &co, true)
	if err != nil {
		return err
	}
	defer release()
	if len(gr.Share.Partitions) > 0 {
		w.Header().Set("Strata-Group-Ack", gr.Share.String())
		w.Header().Set("Strata-Version", strconv.FormatUint(gr.Share.Through, 10))
	}
	err = s.writeRows(w, r, schema, -1, changes.GroupRows(gr.Changes(r.Context(), co), nil))
	if err != nil { // refused before the answer began: no share to hand back
		w.Header().Del("Strata-Group-Ack")
		w.Header().Del("Strata-Version")
	}
	return err
}

// leaveGroup answers DELETE …/groups/{group}/members/{member}: the member
// leaves, its partitions going to the others at once (204).
func (s *Server) leaveGroup(w http.ResponseWriter, r *http.Request, t *tableState) error {
	if err := changes.LeaveGroup(r.Context(), t.b, r.PathValue("group"), r.PathValue("member"), nil); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// deleteGroup answers DELETE …/groups/{group}: the group's positions go
// (204; 404 when it has none), and garbage collection no longer holds
// what it has not read.
func (s *Server) deleteGroup(w http.ResponseWriter, r *http.Request, t *tableState) error {
	if err := table.DeleteGroup(r.Context(), t.b, r.PathValue("group")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
