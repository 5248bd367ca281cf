package blobtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/harness/testenv"
)

// ProcessRaceChild is the name under which the child of RunProcessRace is
// registered with testenv.
const ProcessRaceChild = "blobtest-process-race"

// Creator makes one conditional create in a child process: it returns nil
// when the create won, ErrExists-kind when it lost.
type Creator func(ctx context.Context, key string, data []byte) error

// RegisterProcessRaceChild registers the child that RunProcessRace starts.
// open turns the URL and mode the parent passes into a Creator; the mode
// lets a test race something other than blob.Open (gocloud's plain
// fileblob, say).
func RegisterProcessRaceChild(open func(ctx context.Context, url, mode string) (Creator, error)) {
	testenv.RegisterChild(ProcessRaceChild, func() int {
		args := testenv.ChildArgs()
		if len(args) != 5 {
			fmt.Fprintln(os.Stderr, "usage: url mode id keys start-unix-nano")
			return 2
		}
		url, mode, id := args[0], args[1], args[2]
		keys, _ := strconv.Atoi(args[3])
		startNs, _ := strconv.ParseInt(args[4], 10, 64)
		ctx := context.Background()
		create, err := open(ctx, url, mode)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		time.Sleep(time.Until(time.Unix(0, startNs)))
		out := bufio.NewWriter(os.Stdout)
		defer out.Flush()
		for i := range keys {
			err := create(ctx, keyOf("prace", i), []byte("proc-"+id))
			switch {
			case err == nil:
				fmt.Fprintf(out, "won %d\n", i)
			case errors.Is(err, blob.ErrExists):
			default:
				fmt.Fprintf(os.Stderr, "key %d: %v\n", i, err)
				return 1
			}
		}
		return 0
	})
}

// RaceResult is what RunProcessRace saw.
type RaceResult struct {
	Keys        int
	DoubleWins  int // keys that more than one process believed it created
	NoWins      int // keys no process created
	WrongWinner int // keys whose content is not a believed winner's
}

// RunProcessRace starts procs OS processes (copies of the test binary, see
// RegisterProcessRaceChild) that each race to create the same keys under
// url, then reads the keys back through b, which must be the same store.
func RunProcessRace(t *testing.T, b blob.Bucket, url, mode string, procs, keys int) RaceResult {
	t.Helper()
	start := time.Now().Add(1500 * time.Millisecond).UnixNano()
	type child struct {
		out, errOut bytes.Buffer
		done        chan error
	}
	children := make([]*child, procs)
	for p := range procs {
		c := &child{done: make(chan error, 1)}
		cmd := testenv.ChildCommand(ProcessRaceChild, url, mode, strconv.Itoa(p), strconv.Itoa(keys), strconv.FormatInt(start, 10))
		cmd.Stdout, cmd.Stderr = &c.out, &c.errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { c.done <- cmd.Wait() }()
		children[p] = c
	}
	winners := make([][]int, keys)
	for p, c := range children {
		if err := <-c.done; err != nil {
			t.Fatalf("process %d: %v\n%s", p, err, c.errOut.String())
		}
		for line := range strings.Lines(c.out.String()) {
			var k int
			if _, err := fmt.Sscanf(line, "won %d", &k); err == nil {
				winners[k] = append(winners[k], p)
			}
		}
	}
	res := RaceResult{Keys: keys}
	ctx := context.Background()
	for k, ws := range winners {
		got, err := b.Get(ctx, keyOf("prace", k))
		switch {
		case len(ws) == 0:
			res.NoWins++
		case len(ws) > 1:
			res.DoubleWins++
		case err != nil || string(got) != fmt.Sprintf("proc-%d", ws[0]):
			res.WrongWinner++
		}
	}
	return res
}
