package engine_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/harness/testenv"
)

// What the process's shard does reaches the DB's listener as the DB's
// own events, named by the table: its merge commits and its write stalls
// (a flush waiting for merges to take generations). Before, a shard's
// stalls reached no one, and its commits only a callback the server set
// on the shard's options around the engine.
func TestTheShardsCommitsAndStallsAreTheDBsEvents(t *testing.T) {
	b, _ := blob.Open(ctx, "mem://")
	rolloutsTable(t, b, 1, 10)
	var mu sync.Mutex
	var stalls []engine.WriteStallInfo
	var commits []engine.CommitInfo
	db, err := engine.Open(ctx, b, &engine.Options{Name: "t", Log: quiet, Shard: engine.ShardOptions{Shard: "w1", MaxPendingGenerations: 1},
		Listener: engine.EventListener{
			WriteStall: func(i engine.WriteStallInfo) { mu.Lock(); stalls = append(stalls, i); mu.Unlock() },
			CommitEnd:  func(i engine.CommitInfo) { mu.Lock(); commits = append(commits, i); mu.Unlock() },
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 2 {
		rec := rollouts.Batch(testenv.Allocator(t), 42, 1, int64(i*10), 10)
		_, err := db.Append(ctx, engine.AppendOptions{}, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, err := db.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	flushed := make(chan error, 1)
	go func() { _, err := db.Flush(ctx); flushed <- err }()
	time.Sleep(50 * time.Millisecond) // the flush waits for room
	s, err := db.Shard(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(stalls) != 1 || stalls[0].Table != "t" || stalls[0].Shard != "w1" || stalls[0].Reason != engine.StallGenerations || stalls[0].Duration <= 0 {
		t.Errorf("stalls heard: %+v, want one of table t's shard w1 waiting for merges", stalls)
	}
	if len(commits) == 0 || commits[0].Table != "t" || commits[0].Shard != "w1" || commits[0].Err != nil {
		t.Errorf("commits heard: %+v, want the shard's merge commit", commits)
	}
}
