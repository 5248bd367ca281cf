package table

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table/format"
)

// ConsumersDir holds the named consumers' positions, one object each.
const ConsumersDir = "_refs/consumers/"

// DefaultConsumerRetention is how long garbage collection keeps the
// versions a named consumer has not read yet, counted from when each was
// written (compactor.GCPolicy.ConsumerRetention).
const DefaultConsumerRetention = 7 * 24 * time.Hour

// Consumer is a named reader's position: it has read every change through
// Version.
type Consumer struct {
	Name    string    `json:"name"`
	Version uint64    `json:"version"`
	Updated time.Time `json:"updated"`
}

// ConsumerKey names consumer name's object.
func ConsumerKey(name string) string { return ConsumersDir + name + ".json" }

// SetConsumer records that consumer name has read every change through
// version v. The object is written over (one process follows under a
// name). A position past the latest version is refused
// (ErrVersionNotFound), and so is one at or below the garbage collector's
// boundary, as a tag is: those versions may be gone.
func SetConsumer(ctx context.Context, b blob.Bucket, name string, v uint64) error {
	if err := checkRefName("consumer", name); err != nil {
		return err
	}
	// A position past the table's versions would make the consumer wait
	// for versions it never reads.
	latest, err := LatestVersion(ctx, b)
	if err != nil {
		return err
	}
	if v > latest {
		return fmt.Errorf("table: consumer %q at version %d: the latest version is %d: %w", name, v, latest, format.ErrVersionNotFound)
	}
	// A position garbage collection has passed is refused before it is
	// stored: the consumer would be left on a version no one can read
	// after.
	if err := checkNotCollected(ctx, b, v); err != nil {
		return err
	}
	data, err := json.Marshal(Consumer{Name: name, Version: v, Updated: time.Now().UTC()})
	if err != nil {
		return err
	}
	if err := b.Put(ctx, ConsumerKey(name), bytes.NewReader(data)); err != nil {
		return err
	}
	// A collection that ran meanwhile may have passed it all the same
	// (it reads the positions after it moves its boundary): the consumer
	// is told, as its changes would tell it.
	return checkNotCollected(ctx, b, v)
}

// checkNotCollected is a *ChangesCollectedError when version v (not 0,
// the table's creation) is at or below the GC boundary.
func checkNotCollected(ctx context.Context, b blob.Bucket, v uint64) error {
	boundary, err := GCBoundary(ctx, b)
	if err != nil || v == 0 || v > boundary {
		return err
	}
	return &format.ChangesCollectedError{Version: v, Oldest: boundary + 1}
}

// ReadConsumer reads consumer name's position (ErrNotFound when it has
// none).
func ReadConsumer(ctx context.Context, b blob.Bucket, name string) (Consumer, error) {
	if err := checkRefName("consumer", name); err != nil {
		return Consumer{}, err
	}
	data, err := b.Get(ctx, ConsumerKey(name))
	if errors.Is(err, blob.ErrNotFound) {
		return Consumer{}, fmt.Errorf("table: consumer %q: %w", name, format.ErrNotFound)
	}
	if err != nil {
		return Consumer{}, err
	}
	var c Consumer
	if err := json.Unmarshal(data, &c); err != nil || c.Name != name {
		return Consumer{}, format.Corrupt(ConsumerKey(name), "not a consumer's position", err)
	}
	return c, nil
}

// Consumers lists every named consumer's position.
func Consumers(ctx context.Context, b blob.Bucket) ([]Consumer, error) {
	var out []Consumer
	for o, err := range blob.List(ctx, b, ConsumersDir, 0) {
		if err != nil {
			return nil, err
		}
		name, ok := strings.CutSuffix(o.Key[len(ConsumersDir):], ".json")
		if !ok {
			continue
		}
		c, err := ReadConsumer(ctx, b, name)
		if errors.Is(err, format.ErrNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// DeleteConsumer removes consumer name's position (ErrNotFound when it
// has none): garbage collection no longer keeps versions for it.
func DeleteConsumer(ctx context.Context, b blob.Bucket, name string) error {
	if err := checkRefName("consumer", name); err != nil {
		return err
	}
	err := b.Delete(ctx, ConsumerKey(name))
	if errors.Is(err, blob.ErrNotFound) {
		return fmt.Errorf("table: consumer %q: %w", name, format.ErrNotFound)
	}
	return err
}
