package server

import (
	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// The server answers in package api's types; these map the engine's to
// them, so a change inside the engine never changes the wire by accident.

func apiIndex(ix format.Index) api.Index {
	return api.Index{ID: ix.ID, Column: ix.Column, Key: ix.Key, Rows: ix.Rows, CoveredBelow: ix.CoveredBelow}
}

func apiIndexes(ixs []format.Index) []api.Index {
	out := make([]api.Index, len(ixs))
	for i, ix := range ixs {
		out[i] = apiIndex(ix)
	}
	return out
}

func apiTag(t table.Tag) api.Tag {
	return api.Tag{Name: t.Name, Version: t.Version, Created: t.Created}
}

func apiTags(ts []table.Tag) []api.Tag {
	out := make([]api.Tag, len(ts))
	for i, t := range ts {
		out[i] = apiTag(t)
	}
	return out
}

func apiVersions(vs []table.VersionInfo) []api.Version {
	out := make([]api.Version, len(vs))
	for i, v := range vs {
		out[i] = api.Version{Version: v.Version, Time: v.Time, Kind: string(v.Kind), Rows: v.Rows}
	}
	return out
}

func apiTables(ts []format.Listed) []api.ListedTable {
	out := make([]api.ListedTable, len(ts))
	for i, t := range ts {
		out[i] = api.ListedTable{Name: t.Name, Version: t.Version}
	}
	return out
}

func apiRuns(runs []engine.Run) []api.CompactRun {
	out := make([]api.CompactRun, len(runs))
	for i, r := range runs {
		out[i] = api.CompactRun{Kind: engine.KindOf(r), ObjectsDeleted: r.ObjectsDeleted, Generations: r.Generations, Started: r.Started, DurationS: r.DurationS, Version: r.Version, FragmentsBefore: r.FragmentsBefore,
			FragmentsAfter: r.FragmentsAfter, Rows: r.Rows, BytesRewritten: r.BytesRewritten, Error: r.Error, Adopted: r.Adopted,
			LastCompaction: r.LastCompaction, TotalCompactions: r.TotalCompactions, LastError: r.LastError, LastErrorAt: r.LastErrorAt,
			TotalAdopted: r.TotalAdopted}
	}
	return out
}

func apiKindRuns(kinds map[string]engine.KindStatus) map[string]api.KindRun {
	out := make(map[string]api.KindRun, len(kinds))
	for k, ks := range kinds {
		out[k] = api.KindRun{LastRun: ks.LastRun, DurationS: ks.DurationS, LastSuccess: ks.LastSuccess, LastError: ks.LastError, LastErrorAt: ks.LastErrorAt}
	}
	return out
}

func apiQuarantined(qs []engine.Quarantined) []api.Quarantined {
	if len(qs) == 0 {
		return nil
	}
	out := make([]api.Quarantined, len(qs))
	for i, q := range qs {
		out[i] = api.Quarantined{Position: q.Position, Key: q.Key, Reason: q.Reason}
	}
	return out
}
