package server

import (
	"context"
	"net/http"
	"slices"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// The routes on tables as wholes: list, describe, drop, and the check of
// where a created table goes (createTable, beside appends, runs it). A
// table's name is its path under the server's bucket (see
// format.CheckName).

// listTables lists the tables under the server's bucket, at any depth,
// with their newest versions (format.ListTables: a LIST a folder). The
// bucket's root, were it a table, has no name to serve it by.
func (s *Server) listTables(w http.ResponseWriter, r *http.Request) error {
	root, err := s.opts.Open(r.Context(), s.opts.Bucket)
	if err != nil {
		return err
	}
	defer root.Close()
	tables, err := format.ListTables(r.Context(), root)
	if err != nil {
		return err
	}
	p := principalOf(r.Context())
	tables = slices.DeleteFunc(tables, func(l format.Listed) bool { return l.Name == "" || !p.seesTable(l.Name) })
	writeJSON(w, http.StatusOK, api.TableList{Tables: apiTables(tables)})
	return nil
}

// checkPlacement refuses (409) a table that would share a folder with
// another table's own objects (format.CheckPlacement). The server's bucket
// is opened only when the name has a reserved segment.
func (s *Server) checkPlacement(ctx context.Context, t *tableState) error {
	var root blob.Bucket
	defer func() {
		if root != nil {
			root.Close()
		}
	}()
	return format.CheckPlacement(ctx, t.b, t.name, func(ctx context.Context, above string) (bool, error) {
		if root == nil {
			var err error
			if root, err = s.opts.Open(ctx, s.opts.Bucket); err != nil {
				return false, err
			}
		}
		return format.IsTable(ctx, root, above)
	})
}

func info(name string, m *format.Manifest) api.TableInfo {
	cluster, _, _ := evolve.ClusterColumns(m.Schema(), m.ClusterBy)
	return api.TableInfo{Name: name, Version: m.Version, Rows: m.Rows(), Fragments: len(m.Fragments), Bytes: m.Bytes(), Schema: api.SchemaOf(m.Schema()), ClusterBy: cluster}
}

// describeTable answers GET …/TABLE: the latest version's figures (or
// those of version=, tag= or as_of=); with written= (see ownWrites), its
// rows count the client's own writes not merged yet too.
func (s *Server) describeTable(w http.ResponseWriter, r *http.Request, t *tableState) error {
	oo, fresh, written, err := readPoint(r)
	if err != nil {
		return err
	}
	if fresh {
		return badRequest("fresh=true: a table is described as of a version (version=, tag=, as_of=, or the latest)")
	}
	snap, err := table.Open(r.Context(), t.b, &oo)
	if err != nil {
		return err
	}
	res := info(t.name, snap.Manifest())
	if written != nil {
		one := table.ScanOptions{Columns: []string{snap.Manifest().Schema().Field(0).Name}}
		if rows := s.ownWrites(r.Context(), t, snap, written, one); rows != nil {
			if res.Rows, err = rowsIn(rows); err != nil {
				return err
			}
		}
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// dropTable deletes every object of the table (engine.DB.Drop).
func (s *Server) dropTable(w http.ResponseWriter, r *http.Request, t *tableState) error {
	// No export of the table's Iceberg view runs while it is dropped: one
	// could write the view again after the drop deleted it.
	release, err := t.view.take(r.Context())
	if err != nil {
		return err
	}
	defer release()
	found := false
	err = t.db.Drop(r.Context(), engine.DropOptions{Wait: s.opts.DropWait, Found: func() {
		found = true
		s.mu.Lock()
		delete(s.mu.tables, t.name)
		s.mu.Unlock()
	}})
	if !found {
		return err // no table: nothing stopped, the handle stays open
	}
	if cerr := t.db.Close(); cerr != nil {
		s.opts.Log.Warn("closing the dropped table's handle", "table", t.name, "error", cerr.Error())
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
