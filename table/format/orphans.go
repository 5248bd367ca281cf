package format

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/stratadb/strata/blob"
)

// Garbage collection deletes data objects that no version it read
// references. A writer stalled longer than the safety age may still be on
// its way to committing one of them; it must then never acknowledge that
// commit. Orphan records make that decidable:
//
//  1. Before deleting unreferenced objects, the collector creates an
//     orphan record listing them (OrphansDir, put-if-absent).
//  2. Only then does it look for versions created since it listed them,
//     and spares every object such a version references.
//  3. A commit whose data objects are old enough for garbage collection
//     to have taken them reads the orphan records after its manifest
//     lands. If one lists an object it added, the commit is not
//     acknowledged (it is undone, and its data written anew).
//
// If the record came before the manifest, the committer sees it (3); if
// after, the collector sees the manifest (2) and spares the object. So an
// acknowledged commit's objects are never collected, and a missing object
// that an orphan record created before the commit's manifest lists is
// proof that the commit was never acknowledged: the one case in which a
// repair may take a commit back (see compactor.Repair). Any other missing
// object is data loss for an operator to see, never to be undone silently.

// OrphansDir holds the collector's orphan records.
const OrphansDir = "_gc/orphans/"

// OrphanRecord lists objects a collection is about to delete.
type OrphanRecord struct {
	Created time.Time `json:"created"` // the collector's clock
	Keys    []string  `json:"keys"`
	// Where is the record's key and When its creation on the store's
	// clock (from the listing); not stored.
	Where string    `json:"-"`
	When  time.Time `json:"-"`
}

// OrphanRecordKey names a record made at t; newer records list first.
func OrphanRecordKey(t time.Time) string {
	return fmt.Sprintf("%s%020d-%s.json", OrphansDir, math.MaxInt64-t.UnixNano(), NewID())
}

// WriteOrphanRecord creates a record of keys made at now.
func WriteOrphanRecord(ctx context.Context, b blob.Bucket, keys []string, now time.Time) error {
	data, err := json.Marshal(OrphanRecord{Created: now.UTC(), Keys: keys})
	if err != nil {
		return err
	}
	return b.PutIfAbsent(ctx, OrphanRecordKey(now), data)
}

// OrphanRecords reads the records, newest first, stopping at the first one
// the store created before since (zero: all of them).
func OrphanRecords(ctx context.Context, b blob.Bucket, since time.Time) ([]OrphanRecord, error) {
	var out []OrphanRecord
	for o, err := range blob.List(ctx, b, OrphansDir, 0) {
		if err != nil {
			return nil, err
		}
		if !strings.HasSuffix(o.Key, ".json") {
			continue
		}
		if !since.IsZero() && o.ModTime.Before(since) {
			break
		}
		data, err := b.Get(ctx, o.Key)
		if errors.Is(err, blob.ErrNotFound) {
			continue // pruned meanwhile
		}
		if err != nil {
			return nil, err
		}
		var r OrphanRecord
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, Corrupt(o.Key, "not an orphan record", err)
		}
		r.Where, r.When = o.Key, o.ModTime
		out = append(out, r)
	}
	return out, nil
}

// ErrMissingData: a version references a data object that is not in the
// bucket. Always wrapped in a *MissingDataError.
var ErrMissingData = errors.New("data the table references is missing")

// MissingDataError names what is missing and where it is referenced.
type MissingDataError struct {
	Version uint64   // the version read (0: not known)
	Keys    []string // the missing objects
	Detail  string   // what is known of how they went (may be empty)
	Err     error    // the store's answer, if any
}

func (e *MissingDataError) Unwrap() error { return e.Err }

func (e *MissingDataError) Error() string {
	msg := fmt.Sprintf("table: %d object(s) that version %d references are missing from the bucket: %s", len(e.Keys), e.Version, strings.Join(e.Keys, ", "))
	if e.Detail != "" {
		msg += "; " + e.Detail
	}
	return msg + " (`strata repair` puts back what a writer that died mid-commit left out, losing nothing; otherwise restore them, or drop them from the table with `strata repair --drop-missing`)"
}

// Is makes errors.Is(err, ErrMissingData) true.
func (e *MissingDataError) Is(target error) bool { return target == ErrMissingData }
