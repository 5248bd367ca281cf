package server

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A budget of 1,000 bytes with a write share of 200: reads 800, of which
// holds 200 and fragments 600.
func testBudget() *budget { return newBudget(1000, 200, 20*time.Millisecond) }

// Readers holding every byte they may — their holds and their scans'
// fragments — leave a writer its share: it is admitted at once, and a
// write beyond the share waits, then is refused, like a read.
func TestReadersDoNotStarveAWriter(t *testing.T) {
	b := testBudget()
	if _, err := b.newHolds().hold(context.Background(), 200); err != nil {
		t.Fatal(err)
	}
	m := &scanMemory{b: b}
	if err := m.Reserve(context.Background(), 600); err != nil {
		t.Fatal(err)
	}
	if _, err := b.newHolds().hold(context.Background(), 1); !errors.Is(err, errBusy) {
		t.Fatalf("a read past the readers' parts: %v", err)
	}
	if err := (&scanMemory{b: b}).Reserve(context.Background(), 1); !errors.Is(err, errBusy) {
		t.Fatalf("a scan past the readers' parts: %v", err)
	}
	release, err := b.write(context.Background(), 150)
	if err != nil {
		t.Fatalf("a write while readers hold all they may: %v", err)
	}
	if _, err := b.write(context.Background(), 100); !errors.Is(err, errBusy) {
		t.Fatalf("a write past the write share, with the readers' parts full: %v", err)
	}
	release()
	if _, err := b.write(context.Background(), 200); err != nil {
		t.Fatalf("a write of the whole share: %v", err)
	}
}

// A write that does not fit its share takes room the fragments part has
// free, without waiting; a read never takes the write share.
func TestAWriteBorrowsFromIdleReaders(t *testing.T) {
	b := testBudget()
	if _, err := b.write(context.Background(), 200); err != nil {
		t.Fatal(err)
	}
	release, err := b.write(context.Background(), 500)
	if err != nil {
		t.Fatalf("a write while the fragments part is idle: %v", err)
	}
	if err := (&scanMemory{b: b}).Reserve(context.Background(), 200); !errors.Is(err, errBusy) {
		t.Fatalf("a scan while a write borrows all but 100 of its part: %v", err)
	}
	release()
	if err := (&scanMemory{b: b}).Reserve(context.Background(), 600); err != nil {
		t.Fatalf("a scan once the write is done: %v", err)
	}
}

// A request larger than its part is granted the whole part, alone: it
// waits for the others, and the others wait for it.
func TestAnOversizeRequestIsAdmittedAlone(t *testing.T) {
	b := testBudget()
	m := &scanMemory{b: b}
	if err := m.Reserve(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	if err := (&scanMemory{b: b}).Reserve(context.Background(), 5000); !errors.Is(err, errBusy) {
		t.Fatalf("an oversize scan while another holds 100: %v", err)
	}
	m.Release(100)
	big := &scanMemory{b: b}
	if err := big.Reserve(context.Background(), 5000); err != nil {
		t.Fatalf("an oversize scan alone: %v", err)
	}
	if err := (&scanMemory{b: b}).Reserve(context.Background(), 1); !errors.Is(err, errBusy) {
		t.Fatalf("a scan while an oversize one holds the part: %v", err)
	}
	big.Release(5000)
	if err := (&scanMemory{b: b}).Reserve(context.Background(), 600); err != nil {
		t.Fatalf("the whole part once the oversize scan is done: %v", err)
	}
	release, err := b.newHolds().hold(context.Background(), 1<<40)
	if err != nil {
		t.Fatalf("an oversize hold alone: %v", err)
	}
	if _, err := b.newHolds().hold(context.Background(), 1); !errors.Is(err, errBusy) {
		t.Fatalf("a hold while an oversize one holds the part: %v", err)
	}
	release()
}

// Only a scan's first fragment is its admission: past BusyWait, a later
// one still waits, for as long as the request lasts.
func TestAScanWaitsForItsLaterFragments(t *testing.T) {
	b := testBudget()
	m := &scanMemory{b: b}
	if err := m.Reserve(context.Background(), 300); err != nil {
		t.Fatal(err)
	}
	other := &scanMemory{b: b}
	if err := other.Reserve(context.Background(), 300); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- m.Reserve(context.Background(), 300) }()
	time.Sleep(5 * b.wait) // well past BusyWait
	other.Release(300)
	if err := <-got; err != nil {
		t.Fatalf("a scan's second fragment, once another scan let go: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { got <- m.Reserve(ctx, 300) }()
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("a fragment waiting when its request ends: %v", err)
	}
}

// A read holding some of the holds part that asks for more than the rest
// — a fresh read's WAL rows after its scan's allowance, a take's keys
// after its body — is granted the rest, at most the whole part, rather
// than refused bytes it could never get; it gives the part back whole.
func TestAReadIsGrantedAtMostItsWholePart(t *testing.T) {
	b := testBudget()
	h := b.newHolds()
	first, err := h.hold(context.Background(), 50)
	if err != nil {
		t.Fatal(err)
	}
	second, err := h.hold(context.Background(), 1000)
	if err != nil {
		t.Fatalf("more than the part, holding 50 of it: %v", err)
	}
	if _, err := b.newHolds().hold(context.Background(), 1); !errors.Is(err, errBusy) {
		t.Fatalf("another read while one holds the whole part: %v", err)
	}
	second()
	if _, err := b.newHolds().hold(context.Background(), 151); !errors.Is(err, errBusy) {
		t.Fatalf("more than the part left while the first reservation is held: %v", err)
	}
	first()
	if _, err := b.newHolds().hold(context.Background(), 200); err != nil {
		t.Fatalf("the whole part once the read is done: %v", err)
	}
}
