package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/client"
)

// lsm is a server's LSM as CheckpointLSM sees it through the stats route:
// a model that moves one step per stats read. A flush asked for seals,
// two reads later, the memtable's entries that were in it when asked (a
// flush runs in the background); a merge asked for moves every shard's
// watermark, two reads later, to its newest generation when asked (as a
// fleet merge does, whoever wrote the shard). Only shard "own" is the
// server's: it has a memtable.
type lsm struct {
	mu     sync.Mutex
	walEnd uint64   // the newest WAL entry of "own"
	mem    []uint64 // the WAL positions in its memtable, oldest first
	gens   map[string]uint64
	marks  map[string]uint64
	// flushes pending, in order: each seals the entries at or below upTo
	// when its wait reaches zero; the first only counts down.
	flushes []*pendingFlush
	merge   *pendingMerge
	// sustained: a new entry reaches the memtable at every read.
	sustained bool
	// mergeNever: a merge asked for is taken (202) and never runs.
	mergeNever bool
	reads      int
	refused    int // merges asked for while one ran (answered 429)
}

type pendingFlush struct {
	upTo uint64
	wait int
}

type pendingMerge struct {
	to   map[string]uint64
	wait int
}

func (m *lsm) step() {
	m.reads++
	if len(m.flushes) > 0 {
		f := m.flushes[0]
		if f.wait--; f.wait <= 0 {
			m.flushes = m.flushes[1:]
			n := 0
			for n < len(m.mem) && m.mem[n] <= f.upTo {
				n++
			}
			if n > 0 {
				m.mem = m.mem[n:]
				m.gens["own"]++
			}
		}
	}
	if mg := m.merge; mg != nil {
		if mg.wait--; mg.wait <= 0 {
			for s, g := range mg.to {
				m.marks[s] = max(m.marks[s], g)
			}
			m.merge = nil
		}
	}
	if m.sustained {
		m.walEnd++
		m.mem = append(m.mem, m.walEnd)
	}
}

func (m *lsm) stats() api.LSMStats {
	m.step()
	st := api.LSMStats{Merging: m.merge != nil}
	for _, s := range []string{"other", "own"} {
		ss := api.ShardStats{Shard: s, Watermark: m.marks[s], NewestGeneration: m.gens[s]}
		if s == "own" {
			rows, from, merging := int64(len(m.mem)), uint64(0), m.merge != nil
			if len(m.mem) > 0 {
				from = m.mem[0]
			}
			ss.Own, ss.WALLastWritten, ss.MemtableRows, ss.MemtableFrom, ss.Merging = true, m.walEnd, &rows, &from, &merging
		}
		ss.PendingGenerations = int(ss.NewestGeneration - ss.Watermark)
		st.Shards = append(st.Shards, ss)
	}
	return st
}

func (m *lsm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/lsm/stats"):
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(m.stats())
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/lsm/flush"):
		m.flushes = append(m.flushes, &pendingFlush{upTo: m.walEnd, wait: 2})
		w.WriteHeader(http.StatusAccepted)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/lsm/merge"):
		if m.merge != nil {
			m.refused++
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: api.CodeMergeRunning, Message: "a merge is running"}})
			return
		}
		if !m.mergeNever {
			m.merge = &pendingMerge{to: map[string]uint64{"own": m.gens["own"], "other": m.gens["other"]}, wait: 2}
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		http.NotFound(w, r)
	}
}

// checkpoint runs CheckpointLSM against m, polling without pause.
func checkpoint(t *testing.T, m *lsm) error {
	t.Helper()
	srv := httptest.NewServer(m)
	defer srv.Close()
	c, err := client.New(srv.URL, &client.Options{Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.CheckpointLSM(ctx, "t", client.CheckpointOptions{Poll: time.Microsecond, MaxStalls: 40})
}

// The server's memtable holds WAL entries 5, 6 and 7 when the checkpoint
// begins, and a flush already running takes only 5 and 6 into
// generation 3: entry 7, still in the memtable, goes into generation 4
// with the flush the checkpoint asked for. The checkpoint waits for that
// flush — the memtable holds an entry written before it began — and ends
// only once generation 4 is merged, with the other shard's generations
// merged too; it never asks for a merge while one runs.
func TestACheckpointWaitsForTheMemtableThatHeldItsEntries(t *testing.T) {
	m := &lsm{walEnd: 7, mem: []uint64{5, 6, 7},
		gens:    map[string]uint64{"own": 2, "other": 5},
		marks:   map[string]uint64{"own": 2, "other": 3},
		flushes: []*pendingFlush{{upTo: 6, wait: 2}}}
	if err := checkpoint(t, m); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gens["own"] != 4 {
		t.Fatalf("the model made generations up to %d, want 4", m.gens["own"])
	}
	if m.marks["own"] < 4 {
		t.Fatalf("the checkpoint ended with the server's shard merged to generation %d; WAL entry 7, in the memtable when it began, is in generation 4", m.marks["own"])
	}
	if m.marks["other"] < 5 {
		t.Fatalf("the checkpoint ended with the other shard merged to generation %d of 5", m.marks["other"])
	}
	if m.refused > 0 {
		t.Fatalf("the checkpoint asked for a merge %d times while one ran", m.refused)
	}
}

// Under sustained writes the memtable is never empty: the checkpoint waits
// for the entries written before it began, not for those after, and ends.
func TestACheckpointEndsUnderSustainedWrites(t *testing.T) {
	m := &lsm{walEnd: 7, mem: []uint64{5, 6, 7}, sustained: true,
		gens:  map[string]uint64{"own": 2, "other": 1},
		marks: map[string]uint64{"own": 2, "other": 1}}
	if err := checkpoint(t, m); err != nil {
		t.Fatalf("a checkpoint under sustained writes: %v", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.marks["own"] < 3 {
		t.Fatalf("the checkpoint ended with the shard merged to generation %d; entries 5-7 are in generation 3", m.marks["own"])
	}
}

// A merge that never runs is no progress: the checkpoint fails after
// MaxStalls polls, naming what still awaits merging.
func TestACheckpointWithoutProgressFails(t *testing.T) {
	m := &lsm{walEnd: 7, mergeNever: true,
		gens:  map[string]uint64{"own": 4, "other": 1},
		marks: map[string]uint64{"own": 2, "other": 1}}
	err := checkpoint(t, m)
	if err == nil || !strings.Contains(err.Error(), "made no progress in 40 polls") || !strings.Contains(err.Error(), "2 generations") {
		t.Fatalf("a checkpoint whose merges never run: %v", err)
	}
}
