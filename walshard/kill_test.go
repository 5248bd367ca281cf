package walshard_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/compactor"
	"github.com/stratadb/strata/harness/testenv"
	"github.com/stratadb/strata/walshard"
)

const killChild = "walshard-kill-worker"

// registerKillChild registers a worker that appends ids from a starting
// point through shard w1, with background flushes and merges, printing
// each acknowledged id, until it is killed.
func registerKillChild() {
	testenv.RegisterChild(killChild, func() int {
		args := testenv.ChildArgs() // url start reuse-bytes
		start, _ := strconv.ParseInt(args[1], 10, 64)
		reuse, _ := strconv.ParseInt(args[2], 10, 64)
		b, err := blob.Open(context.Background(), args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		s, err := walshard.Open(context.Background(), b, &walshard.Options{Shard: "w1", FlushRows: 20, MergeInterval: 10 * time.Millisecond, ReuseBytes: reuse})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		out := bufio.NewWriter(os.Stdout)
		for id := start; ; id++ {
			rec := batch("w1", id)
			err := s.Append(context.Background(), rec)
			rec.Release()
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			fmt.Fprintln(out, id)
			out.Flush()
		}
	})
}

// Worker processes are killed with SIGKILL at random moments and
// restarted; every id any of them acknowledged ends up in the table
// exactly once.
func TestSIGKILLedWorkersLoseNothingFile(t *testing.T) { killedWorkers(t, "file://"+t.TempDir(), 0) }
func TestSIGKILLedWorkersLoseNothingMinIO(t *testing.T) {
	killedWorkers(t, testenv.MinIO(t).URL(t), 0)
}

// The same with every WAL entry joining the table as it is
// (ReuseBytes); afterwards compaction and garbage collection take the
// entries, and the rows stay.
func TestSIGKILLedWorkersWritingRowsOnceLoseNothingMinIO(t *testing.T) {
	killedWorkers(t, testenv.MinIO(t).URL(t), 1)
}

func killedWorkers(t *testing.T, u string, reuse int64) {
	b := newTable(t, u)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	var acked []int64
	tried := map[int64]bool{}
	const rounds = 6
	for r := range rounds {
		start := int64(r) * 1_000_000
		cmd := testenv.ChildCommand(killChild, u, strconv.FormatInt(start, 10), strconv.FormatInt(reuse, 10))
		stdout, _ := cmd.StdoutPipe()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var got []int64
		done := make(chan struct{})
		firstAck := make(chan struct{})
		go func() {
			defer close(done)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				id, err := strconv.ParseInt(sc.Text(), 10, 64)
				if err == nil {
					mu.Lock()
					got = append(got, id)
					if len(got) == 1 {
						close(firstAck)
					}
					mu.Unlock()
				}
			}
			_, _ = io.Copy(io.Discard, stdout)
		}()
		// Kill at a random moment once the worker is under way.
		select {
		case <-firstAck:
		case <-done:
		case <-time.After(30 * time.Second):
		}
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		<-done
		if len(got) == 0 {
			t.Fatalf("round %d: the worker acknowledged nothing before the kill\n%s", r, stderr.String())
		}
		acked = append(acked, got...)
		// The id after the last acknowledged one may have landed unacknowledged.
		for _, id := range got {
			tried[id] = true
		}
		tried[got[len(got)-1]+1] = true
	}
	s := open(t, b, "w1", walshard.Options{})
	defer s.Close()
	if _, err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(when string) map[int64]int {
		seen := baseIDs(t, b)
		for _, id := range acked {
			if seen[id] != 1 {
				t.Fatalf("%s: acknowledged id %d seen %d times", when, id, seen[id])
			}
		}
		for id, n := range seen {
			if !tried[id] || n != 1 {
				t.Fatalf("%s: id %d seen %d times; never acknowledged", when, id, n)
			}
		}
		return seen
	}
	seen := check("after the last merge")
	if reuse > 0 {
		if _, err := compactor.Compact(ctx, b, &compactor.Policy{MinFragments: 2}, nil); err != nil {
			t.Fatal(err)
		}
		res, err := compactor.GC(ctx, b, &compactor.GCPolicy{KeepVersions: 1, RetainFor: compactor.MinRetain, SafetyAge: compactor.MinRetain},
			time.Now().Add(3*compactor.MinRetain))
		if err != nil {
			t.Fatal(err)
		}
		check("after compaction and collection")
		t.Logf("collection deleted %d objects", len(res.ObjectsDeleted))
	}
	t.Logf("%d kills, %d acknowledged rows, %d in the table", rounds, len(acked), len(seen))
}
