package server

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/table"
)

// fragments answers GET …/fragments: the fragments of the version a read
// names (version=, tag=, as_of=; the latest without), which readers
// split between them by slices (sliceQuery).
func (s *Server) fragments(w http.ResponseWriter, r *http.Request, t *tableState) error {
	oo, fresh, written, err := readPoint(r)
	if err != nil {
		return err
	}
	if fresh || written != nil {
		return badRequest("fragments lists a version's fragments: not with fresh=true or written=")
	}
	snap, err := table.Open(r.Context(), t.b, &oo)
	if err != nil {
		return err
	}
	m := snap.Manifest()
	out := api.FragmentList{Version: m.Version, Fragments: make([]api.FragmentInfo, 0, len(m.Fragments))}
	for _, f := range m.Fragments {
		out.Fragments = append(out.Fragments, api.FragmentInfo{ID: f.ID, Rows: f.Rows, LiveRows: f.LiveRows(), Bytes: f.Bytes})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// sliceQuery reads fragment=ID and offsets=LO:HI (every row of the
// fragment without it): a scan of the rows of one fragment at offsets
// LO … HI-1, of a version named as any read's is (not fresh=true or
// written=, which read rows no fragment holds yet).
func sliceQuery(r *http.Request) (*table.Slice, error) {
	q := r.URL.Query()
	if !q.Has("fragment") {
		if q.Has("offsets") {
			return nil, badRequest("offsets= needs fragment=")
		}
		return nil, nil
	}
	id, err := strconv.ParseUint(q.Get("fragment"), 10, 64)
	if err != nil {
		return nil, badRequest("fragment=%q: want a fragment id (GET …/fragments lists them)", q.Get("fragment"))
	}
	sl := &table.Slice{Fragment: id, Hi: 1<<63 - 1}
	if q.Has("offsets") {
		lo, hi, ok := strings.Cut(q.Get("offsets"), ":")
		var errLo, errHi error
		sl.Lo, errLo = strconv.ParseInt(lo, 10, 64)
		sl.Hi, errHi = strconv.ParseInt(hi, 10, 64)
		if !ok || errLo != nil || errHi != nil || sl.Lo < 0 || sl.Hi < sl.Lo {
			return nil, badRequest("offsets=%q: want LO:HI, the rows at offsets LO … HI-1 (0 <= LO <= HI)", q.Get("offsets"))
		}
	}
	if q.Get("fresh") == "true" || q.Has("written") {
		return nil, badRequest("fragment= reads a version's fragment: not with fresh=true or written=")
	}
	return sl, nil
}
