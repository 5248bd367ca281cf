package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table"
)

// lsmFlush seals the server's memtable of the table into a generation in
// the background and answers 202 with no body.
func (s *Server) lsmFlush(w http.ResponseWriter, r *http.Request, t *tableState) error {
	sh, err := t.db.Shard(r.Context())
	if err != nil {
		return err
	}
	t.db.Go("flush", func(ctx context.Context) error {
		_, err := sh.Flush(ctx)
		return err
	})
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// lsmMerge starts a merge of the table — every shard's flushed
// generations in one commit, whoever wrote them — in the background;
// 429 while one of this server runs.
func (s *Server) lsmMerge(w http.ResponseWriter, r *http.Request, t *tableState) error {
	if t.db.Merging() {
		return &apiError{http.StatusTooManyRequests, api.CodeMergeRunning, "a merge of this table is running"}
	}
	t.db.Go("merge", func(ctx context.Context) error {
		_, err := t.db.Merge(ctx)
		if errors.Is(err, engine.ErrMergeRunning) {
			return nil
		}
		return err
	})
	w.WriteHeader(http.StatusAccepted)
	return nil
}

func shardStats(st engine.ShardStats, withRows bool) api.ShardStats {
	out := api.ShardStats{Shard: st.Shard, Own: st.Local, Epoch: st.Epoch, WALLastWritten: st.WALLastWritten, WALFlushed: st.WALFlushed,
		WALLag: st.WALLag, Watermark: st.Watermark, PendingGenerations: st.PendingGenerations, PendingBytes: st.PendingBytes,
		NewestGeneration: st.NewestGeneration, Quarantined: apiQuarantined(st.Quarantined)}
	if st.Local {
		out.MemtableRows, out.MemtableBytes, out.MemtableFrom, out.Merging = &st.MemtableRows, &st.MemtableBytes, &st.MemtableFrom, &st.Merging
		out.Compacting = out.Merging
	} else if !st.LastWrite.IsZero() {
		out.LastWrite = &st.LastWrite
	}
	if withRows {
		out.PendingRows = &st.PendingRows
	}
	return out
}

func (s *Server) lsmStats(w http.ResponseWriter, r *http.Request, t *tableState) error {
	m, err := table.ReadLatest(r.Context(), t.b)
	if err != nil {
		return err
	}
	withRows := r.URL.Query().Get("include_generation_rows") == "true"
	// This server's shard from before a restart is opened, so the rows its
	// WAL acknowledged show in its memtable (a checkpoint waits for them).
	stats, err := t.db.ShardStats(r.Context(), m)
	if err != nil {
		return err
	}
	out := api.LSMStats{Version: m.Version, Merging: t.db.Merging(), Shards: make([]api.ShardStats, 0, len(stats))}
	for _, st := range stats {
		out.Shards = append(out.Shards, shardStats(st, withRows))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
