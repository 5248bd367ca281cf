package blob_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	_ "github.com/stratadb/strata/blob/gcs" // the fake GCS conformance run
	"github.com/stratadb/strata/harness/blobtest"
	"github.com/stratadb/strata/harness/testenv"
)

func TestMain(m *testing.M) {
	blobtest.RegisterProcessRaceChild(openCreator)
	os.Exit(testenv.Main(m))
}

// openCreator is the process-race child's view of a store: Strata's own
// bucket ("strata"), or gocloud's fileblob used directly ("fileblob-plain").
func openCreator(ctx context.Context, rawURL, mode string) (blobtest.Creator, error) {
	if mode == "fileblob-plain" {
		u, err := url.Parse(rawURL)
		if err != nil {
			return nil, err
		}
		gb, err := fileblob.OpenBucket(u.Path, &fileblob.Options{NoTempDir: true})
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, key string, data []byte) error {
			err := gb.WriteAll(ctx, key, data, &gcblob.WriterOptions{IfNotExist: true})
			if err != nil {
				return &blob.Error{Op: "put-if-absent", Key: key, Kind: blob.ErrExists, Err: err}
			}
			return nil
		}, nil
	}
	b, err := blob.Open(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	return b.PutIfAbsent, nil
}

func openURL(t *testing.T, rawURL string) blob.Bucket {
	t.Helper()
	b, err := blob.Open(context.Background(), rawURL)
	if err != nil {
		t.Fatalf("Open(%q): %v", rawURL, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestConformanceMem(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Bucket { return openURL(t, "mem://") }, blobtest.Options{})
}

func TestConformanceFile(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Bucket { return openURL(t, "file://"+t.TempDir()) }, blobtest.Options{})
}

func TestConformanceMinIO(t *testing.T) {
	srv := testenv.MinIO(t)
	blobtest.Run(t, func(t *testing.T) blob.Bucket { return openURL(t, srv.URL(t)) }, blobtest.Options{})
}

func TestConformanceFakeGCS(t *testing.T) {
	srv := testenv.FakeGCS(t)
	blobtest.Run(t, func(t *testing.T) blob.Bucket { return openURL(t, srv.URL(t)) }, blobtest.Options{FoldersOverPage: true})
}

// The wrappers must keep the contract when they inject nothing, or only
// latency.
func TestConformanceFaultWrapperPassThrough(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Bucket {
		return fault.Wrap(openURL(t, "file://"+t.TempDir()), fault.Latency(1, 0, time.Millisecond))
	}, blobtest.Options{RaceRounds: 5})
}

func TestConformanceCountedOverFault(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Bucket {
		b, err := blob.OpenFile(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return blob.NewCounted(fault.Wrap(b, nil))
	}, blobtest.Options{RaceRounds: 5})
}

const procs, raceKeys = 8, 200

func TestProcessRaceFile(t *testing.T) {
	dir := t.TempDir()
	res := blobtest.RunProcessRace(t, openURL(t, "file://"+dir), "file://"+dir, "strata", procs, raceKeys)
	if res.DoubleWins+res.NoWins+res.WrongWinner != 0 {
		t.Fatalf("%d processes racing on %d keys: %+v; want exactly one winner per key", procs, raceKeys, res)
	}
}

func TestProcessRaceMinIO(t *testing.T) {
	u := testenv.MinIO(t).URL(t)
	res := blobtest.RunProcessRace(t, openURL(t, u), u, "strata", procs, raceKeys)
	if res.DoubleWins+res.NoWins+res.WrongWinner != 0 {
		t.Fatalf("%d processes racing on %d keys: %+v; want exactly one winner per key", procs, raceKeys, res)
	}
}

// gocloud's fileblob checks IfNotExist with a per-process lock, a stat and
// a rename, so processes racing on one key can both "win". This shows the
// race test can fail, and why the file backend links instead.
func TestProcessRaceCatchesPlainFileblob(t *testing.T) {
	dir := t.TempDir()
	var res blobtest.RaceResult
	for round := range 5 {
		sub := filepath.Join(dir, "round", string(rune('a'+round)))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		res = blobtest.RunProcessRace(t, openURL(t, "file://"+sub), "file://"+sub, "fileblob-plain", procs, raceKeys)
		t.Logf("round %d: plain fileblob, %d processes, %d keys: %d keys with two or more winners", round, procs, raceKeys, res.DoubleWins)
		if res.DoubleWins > 0 {
			return
		}
	}
	t.Fatalf("plain fileblob never showed a double winner in 5 rounds (%+v): the race test may be too weak", res)
}

func TestSelfTestFailsOnStoreIgnoringConditions(t *testing.T) {
	b := fault.Wrap(openURL(t, "mem://"), fault.OnOps(fault.Always(fault.Fault{Action: fault.IgnoreCondition}), fault.OpPutIfAbsent))
	rep, err := blob.SelfTest(context.Background(), b, 8)
	if !errors.Is(err, blob.ErrNoConditionalWrites) {
		t.Fatalf("SelfTest on a store ignoring conditions: %v (%+v), want ErrNoConditionalWrites", err, rep)
	}
	if rep.Winners != 8 {
		t.Fatalf("report %+v: want all 8 racers to have 'won'", rep)
	}
}

// More racers than MaxSelfTestRacers are refused before any body is made:
// each holds SelfTestObjectBytes.
func TestSelfTestRefusesTooManyRacers(t *testing.T) {
	b := openURL(t, "mem://")
	if _, err := blob.SelfTest(context.Background(), b, blob.MaxSelfTestRacers+1); !errors.Is(err, blob.ErrTooManyRacers) {
		t.Fatalf("SelfTest with %d racers: %v, want ErrTooManyRacers", blob.MaxSelfTestRacers+1, err)
	}
	if rep, err := blob.SelfTest(context.Background(), b, blob.MaxSelfTestRacers); err != nil || rep.Winners != 1 {
		t.Fatalf("SelfTest with %d racers: %+v, %v", blob.MaxSelfTestRacers, rep, err)
	}
}
