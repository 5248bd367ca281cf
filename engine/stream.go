package engine

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table/format"
	"github.com/stratadb/strata/table/fragment"
)

// StreamFragmentRows is where a streamed append rolls over to a new
// fragment.
const StreamFragmentRows = 1 << 20

// StreamOptions shape a streamed append.
type StreamOptions struct {
	// Key, when not nil, names the append (see format.Idempotency).
	Key *format.Idempotency
	// ReadVersion is the version whose schema the rows were written for
	// (0: the latest): the conflict matrix judges the append against every
	// commit after it, so that rows planned on an older version (an
	// Iceberg engine's snapshot) meet the schema changes since.
	ReadVersion uint64
}

// AppendStream appends rows too many to hold at once, all or none, in one
// direct commit: it streams them into fragments of at most
// StreamFragmentRows rows under schema (the table's, as the caller read
// it: the rows are conformed to it), then commits them, named by o.Key
// when not nil. An append whose key a racing commit recorded first
// answers that one as a duplicate. On a failure before the commit, or a commit that
// certainly did not land (a conflict, a duplicate), the fragments written
// are deleted; any other failure may hide a commit that lands later, so
// they stay for garbage collection to judge.
func (db *DB) AppendStream(ctx context.Context, o StreamOptions, schema *arrow.Schema, rows iter.Seq2[arrow.RecordBatch, error]) (Ack, error) {
	txn := format.Transaction{Kind: format.KindAppend, CommitID: format.NewID(), ReadVersion: o.ReadVersion}
	if o.Key != nil {
		k := o.Key.Key(0, time.Now())
		txn.Idempotency = &k
	}
	frags, total, err := db.writeFragments(ctx, schema, rows)
	discard := func() {
		for _, f := range frags {
			_ = db.b.Delete(context.WithoutCancel(ctx), f.Key)
		}
	}
	if err != nil || len(frags) == 0 {
		return Ack{}, err
	}
	t, err := db.verbTable(ctx, "append", false)
	if err != nil {
		discard()
		return Ack{}, err
	}
	txn.Added = frags
	res, err := t.Commit(ctx, txn)
	if errors.Is(err, commit.ErrConflict) || err == nil && res.Duplicate {
		discard()
	}
	if err != nil {
		return Ack{}, err
	}
	if res.Duplicate {
		return Ack{Rows: res.Rows, Version: res.Version, Duplicate: true}, nil
	}
	return Ack{Rows: total, Version: res.Version}, nil
}

// writeFragments streams rows into fragments of at most
// StreamFragmentRows rows. On an error the fragments written are deleted.
func (db *DB) writeFragments(ctx context.Context, schema *arrow.Schema, rows iter.Seq2[arrow.RecordBatch, error]) ([]format.Fragment, int64, error) {
	var frags []format.Fragment
	var w *fragment.Writer
	discard := func() {
		if w != nil {
			w.Abort()
		}
		for _, f := range frags {
			_ = db.b.Delete(context.WithoutCancel(ctx), f.Key)
		}
	}
	var total int64
	for rec, err := range rows {
		if err == nil && w == nil {
			w, err = fragment.NewWriter(ctx, db.b, schema)
		}
		if err == nil {
			err = w.Write(rec)
		}
		if err == nil && w.Rows() >= StreamFragmentRows {
			var f format.Fragment
			f, err = w.Close()
			w = nil
			if err == nil {
				frags = append(frags, f)
			}
		}
		if err != nil {
			discard()
			return nil, 0, err
		}
		total += rec.NumRows()
	}
	if w != nil {
		f, err := w.Close()
		w = nil
		if err != nil {
			discard()
			return nil, 0, err
		}
		frags = append(frags, f)
	}
	return frags, total, nil
}
