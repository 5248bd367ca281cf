package walshard_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/walshard"
)

// testClock is a clock a test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// A shard that opened before another process dropped a column must not
// acknowledge values of that column once its lease on the schema ran out:
// merged under the new schema, they would be lost. Its next write finds
// the newer schema's marker and refuses, writing nothing; opened again,
// the shard refuses the dropped column by name. Before, the shard
// acknowledged the row, and the merge stored it without the column.
func TestAShardWhoseSchemaADropMadeStaleRefusesItsRowsOnceItsLeaseRanOut(t *testing.T) {
	b, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commit.Create(ctx, b, schema, nil, nil); err != nil {
		t.Fatal(err)
	}
	clock := &testClock{now: time.Now()}
	o := walshard.Options{Commit: commit.Options{Now: clock.Now}}
	s := open(t, b, "w1", o)
	defer s.Close()
	appendIDs(t, s, 1) // under the schema it opened with: id, shard
	tb, err := commit.OpenTable(ctx, b, &commit.Options{SchemaWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.DropColumn, Column: "shard"}); err != nil {
		t.Fatal(err)
	}
	clock.add(evolve.SchemaLease)
	err = appendOnce(s, "w1", 2)
	if !errors.Is(err, walshard.ErrSchemaChanged) {
		t.Fatalf("an append naming the dropped column after the lease ran out: %v, want ErrSchemaChanged", err)
	}
	if err := appendOnce(s, "w1", 3); !errors.Is(err, walshard.ErrSchemaChanged) {
		t.Fatalf("the next append on the stale handle: %v, want ErrSchemaChanged", err)
	}
	if err := s.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, baseIDs(t, b), []int64{1})
	s.Close()

	again := open(t, b, "w1", o)
	defer again.Close()
	err = appendOnce(again, "w1", 4)
	if !errors.Is(err, evolve.ErrBadInput) || !strings.Contains(err.Error(), `"shard"`) {
		t.Fatalf("an append naming the dropped column, shard opened again: %v, want a refusal naming the column", err)
	}
}

// Within its lease a shard makes no request to check its schema; the
// first write after the lease ran out makes one, and finds nothing new.
func TestAShardChecksItsSchemaOnceALease(t *testing.T) {
	counted := &schemaChecks{Bucket: newTable(t, "mem://")}
	clock := &testClock{now: time.Now()}
	s := open(t, counted, "w1", walshard.Options{Commit: commit.Options{Now: clock.Now}})
	defer s.Close()
	heads := counted.n.Load
	appendIDs(t, s, 1) // the first write after the open checks
	if n := heads(); n != 1 {
		t.Fatalf("schema checks after the first append: %d, want 1", n)
	}
	for i := range int64(5) {
		clock.add(evolve.SchemaLease / 10)
		appendIDs(t, s, 2+i)
	}
	if n := heads(); n != 1 {
		t.Fatalf("schema checks within the lease: %d, want 1", n)
	}
	clock.add(evolve.SchemaLease)
	appendIDs(t, s, 10)
	if n := heads(); n != 2 {
		t.Fatalf("schema checks after the lease ran out: %d, want 2", n)
	}
}

// schemaChecks counts the reads of schema markers.
type schemaChecks struct {
	blob.Bucket
	n atomic.Int64
}

func (c *schemaChecks) Attributes(ctx context.Context, key string) (blob.Attributes, error) {
	if strings.HasPrefix(key, evolve.SchemaDir) {
		c.n.Add(1)
	}
	return c.Bucket.Attributes(ctx, key)
}

// A check that took longer than the lease and its slack (a slow store),
// as long as a drop waits after its commit, proves nothing
// about the schema when the write begins: a drop may have committed and
// answered meanwhile. The shard checks again, and refuses.
func TestASchemaCheckSlowerThanTheLeaseIsMadeAgain(t *testing.T) {
	b := &slowCheck{Bucket: newTable(t, "mem://")}
	clock := &testClock{now: time.Now()}
	s := open(t, b, "w1", walshard.Options{Commit: commit.Options{Now: clock.Now}})
	defer s.Close()
	appendIDs(t, s, 1)
	clock.add(evolve.SchemaLease)
	// The next check's read answers "no newer schema", as it was when
	// the store read it; by the time the answer arrives a drop has
	// committed and outwaited its lease.
	b.hook = func() {
		tb, err := commit.OpenTable(ctx, b.Bucket, &commit.Options{SchemaWait: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Alter(ctx, evolve.ColumnChange{Op: evolve.DropColumn, Column: "shard"}); err != nil {
			t.Fatal(err)
		}
		clock.add(evolve.SchemaLease + evolve.SchemaLeaseSlack)
	}
	if err := appendOnce(s, "w1", 2); !errors.Is(err, walshard.ErrSchemaChanged) {
		t.Fatalf("an append after a check slower than the lease, a drop landing meanwhile: %v, want ErrSchemaChanged", err)
	}
}

// slowCheck runs hook once, after reading a schema marker and before
// answering.
type slowCheck struct {
	blob.Bucket
	hook func()
}

func (c *slowCheck) Attributes(ctx context.Context, key string) (blob.Attributes, error) {
	a, err := c.Bucket.Attributes(ctx, key)
	if h := c.hook; h != nil && strings.HasPrefix(key, evolve.SchemaDir) {
		c.hook = nil
		h()
	}
	return a, err
}
