package blob

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// SelfTestObjectBytes is the size of the body each racer of SelfTest
// writes; MaxSelfTestRacers bounds the racers, whose bodies are all held
// at once (256 racers: 64 MiB).
const (
	SelfTestObjectBytes = 256 << 10
	MaxSelfTestRacers   = 256
)

// ErrTooManyRacers: SelfTest was asked for more than MaxSelfTestRacers.
var ErrTooManyRacers = errors.New("selftest: too many racers")

// SelfTestReport says what SelfTest checked.
type SelfTestReport struct {
	Key          string        // the fresh key it raced on
	Racers       int           // concurrent conditional creates
	Winners      int           // how many succeeded (must be 1)
	Losers       int           // how many returned ErrExists
	ObjectBytes  int           // size of the object written and read back
	RaceDuration time.Duration // wall time of the race
}

// SelfTest checks that b has what Strata needs, and cleans up after itself:
//
//   - racers concurrent PutIfAbsent calls on one fresh key give exactly one
//     winner, and every loser gets ErrExists;
//   - one more PutIfAbsent of that key, after the race, gets ErrExists;
//   - the winner's object reads back whole, by Get and by ranged reads;
//   - the key shows up in a listing and can be deleted.
//
// A store that ignores conditional creates fails with ErrNoConditionalWrites.
// racers <= 0 means 16; more than MaxSelfTestRacers is ErrTooManyRacers.
func SelfTest(ctx context.Context, b Bucket, racers int) (SelfTestReport, error) {
	if racers <= 0 {
		racers = 16
	}
	if racers > MaxSelfTestRacers {
		return SelfTestReport{Racers: racers}, fmt.Errorf("%w: %d, at most %d (each holds a body of %d KiB)",
			ErrTooManyRacers, racers, MaxSelfTestRacers, SelfTestObjectBytes>>10)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	key := "_selftest/" + hex.EncodeToString(rnd[:])
	rep := SelfTestReport{Key: key, Racers: racers}
	defer func() {
		// Best effort: leave nothing behind, whatever happened.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = b.Delete(cctx, key)
	}()

	// Each racer writes a distinct body, so the survivor names its writer.
	bodies := make([][]byte, racers)
	for i := range bodies {
		bodies[i] = make([]byte, SelfTestObjectBytes)
		_, _ = rand.Read(bodies[i])
	}
	errs := make([]error, racers)
	var start sync.WaitGroup
	start.Add(1)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range racers {
		wg.Go(func() {
			start.Wait()
			errs[i] = b.PutIfAbsent(ctx, key, bodies[i])
		})
	}
	start.Done()
	wg.Wait()
	rep.RaceDuration = time.Since(t0)
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			rep.Winners++
			winner = i
		case errors.Is(err, ErrExists):
			rep.Losers++
		default:
			return rep, fmt.Errorf("selftest: conditional create of %q: %w", key, err)
		}
	}
	rep.ObjectBytes = len(bodies[0])
	if rep.Winners != 1 {
		return rep, newError("put-if-absent", key, ErrNoConditionalWrites,
			fmt.Errorf("%d of %d concurrent conditional creates succeeded; exactly one must", rep.Winners, racers))
	}
	if err := b.PutIfAbsent(ctx, key, []byte("again")); err == nil {
		return rep, newError("put-if-absent", key, ErrNoConditionalWrites,
			errors.New("a conditional create of an existing object succeeded (and replaced it)"))
	} else if !errors.Is(err, ErrExists) {
		return rep, fmt.Errorf("selftest: second conditional create of %q: %w", key, err)
	}
	return rep, checkSelfTestObject(ctx, b, key, bodies[winner])
}

// checkSelfTestObject checks what a store does with the object key, which
// must hold want: it reads back whole and by range, lists, and is
// deleted for good.
func checkSelfTestObject(ctx context.Context, b Bucket, key string, want []byte) error {
	got, err := b.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("selftest: read back: %w", err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("selftest: %q read back %d bytes (sha256 %x), want the winner's %d bytes (sha256 %x)",
			key, len(got), sha256.Sum256(got), len(want), sha256.Sum256(want))
	}
	ra, err := NewReaderAt(ctx, b, key)
	if err != nil {
		return fmt.Errorf("selftest: attributes: %w", err)
	}
	if ra.Size() != int64(len(got)) {
		return fmt.Errorf("selftest: %q: attributes say %d bytes, read %d", key, ra.Size(), len(got))
	}
	tail := make([]byte, 1000)
	if _, err := ra.ReadAt(tail, ra.Size()-1000); err != nil && err != io.EOF {
		return fmt.Errorf("selftest: ranged read: %w", err)
	}
	if !bytes.Equal(tail, got[len(got)-1000:]) {
		return fmt.Errorf("selftest: %q: ranged read of the last 1000 bytes differs from the object", key)
	}
	found := false
	for o, err := range List(ctx, b, "_selftest/", 0) {
		if err != nil {
			return fmt.Errorf("selftest: list: %w", err)
		}
		if o.Key == key {
			found = true
			break
		}
	}
	if !found {
		return fmt.Errorf("selftest: %q is missing from the listing of _selftest/", key)
	}
	if err := b.Delete(ctx, key); err != nil {
		return fmt.Errorf("selftest: delete: %w", err)
	}
	if _, err := b.Get(ctx, key); !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("selftest: %q still readable after delete (err %v)", key, err)
	}
	return nil
}
