package server

import (
	"iter"
	"net/http"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/api"
)

// countRows answers GET …/count: how many rows match filter= (every row
// without one), in the version a scan with the same version=, tag=,
// fresh=true or written= would read. The latest version alone, or a
// named one, is counted from the manifest's statistics wherever they
// decide a fragment (none of its rows can match, or all do), reading
// only the filter's columns of the others; rows not merged yet (fresh,
// or the client's own writes) are counted as a scan of one column reads
// them.
func (s *Server) countRows(w http.ResponseWriter, r *http.Request, t *tableState) error {
	opts, err := scanOptions(r)
	if err != nil {
		return err
	}
	if opts.Slice != nil {
		return badRequest("fragment= slices a scan, not a count")
	}
	oo, fresh, written, err := readPoint(r)
	if err != nil {
		return err
	}
	snap, release, err := s.openRead(r, t, oo, &opts)
	if err != nil {
		return err
	}
	defer release()
	res := api.CountResult{Version: snap.Version()}
	one := opts
	one.Columns = []string{snap.Manifest().Schema().Field(0).Name}
	if _, err := snap.ScanSchema(one); err != nil {
		return badRequest("%v", err)
	}
	var rows iter.Seq2[arrow.RecordBatch, error]
	switch {
	case fresh:
		rows = t.db.ScanFresh(r.Context(), one)
	case written != nil:
		rows = s.ownWrites(r.Context(), t, snap, written, one)
	}
	if rows == nil {
		c, err := snap.Count(r.Context(), opts.Filter)
		if err != nil {
			return err
		}
		res.Rows, res.FragmentsScanned = c.Rows, c.FragmentsScanned
	} else {
		res.Scanned = true
		if res.Rows, err = rowsIn(rows); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
