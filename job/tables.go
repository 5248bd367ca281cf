package job

import (
	"context"
	"fmt"
	"slices"

	"github.com/stratadb/strata/engine"
)

// tables returns the tables a pass serves: Options.Tables and those last
// found under Options.Under.
func (j *runner) tables() []string {
	j.found.mu.Lock()
	defer j.found.mu.Unlock()
	out := slices.Clone(j.o.Tables)
	for _, u := range j.found.urls {
		if !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out
}

// discover looks for the tables under Options.Under when it has found
// none yet (a fresh deployment: a LIST a pass) or when Rediscover has
// passed since it last looked, so that a table created after the Job
// started is served from its next pass on. A table no longer found is no
// longer served, and its kept handle closed. A failed look keeps what was
// found before and is tried again at the next pass; its outcome names
// the bucket URL it failed under.
func (j *runner) discover(ctx context.Context) *TableOutcome {
	if len(j.o.Under) == 0 {
		return nil
	}
	j.found.mu.Lock()
	due := len(j.found.urls) == 0 || j.o.Now().Sub(j.found.at) >= j.o.Rediscover
	j.found.mu.Unlock()
	if !due {
		return nil
	}
	var found []string
	for _, root := range j.o.Under {
		f, err := engine.DiscoverTables(ctx, j.o.Open, root)
		if err != nil {
			err = fmt.Errorf("listing the tables under %s: %w", root, err)
			return &TableOutcome{Table: root, PassOutcome: engine.PassOutcome{Err: err}}
		}
		found = append(found, f...)
	}
	j.found.mu.Lock()
	old := j.found.urls
	j.found.urls, j.found.at = found, j.o.Now()
	j.found.mu.Unlock()
	if slices.Equal(old, found) {
		return nil
	}
	var added, gone []string
	for _, u := range found {
		if !slices.Contains(old, u) {
			added = append(added, u)
		}
	}
	for _, u := range old {
		if !slices.Contains(found, u) && !slices.Contains(j.o.Tables, u) {
			gone = append(gone, u)
			j.forget(u)
		}
	}
	j.o.Log.Info("tables found", "under", j.o.Under, "count", len(found), "new", added, "gone", gone)
	return nil
}

// forget closes the kept handle of table u, if any.
func (j *runner) forget(u string) {
	j.mu.Lock()
	db := j.dbs[u]
	delete(j.dbs, u)
	j.mu.Unlock()
	if db != nil {
		if err := db.Close(); err != nil {
			j.o.Log.Warn("closing the handle of a table no longer served", "table", u, "error", err.Error())
		}
	}
}
