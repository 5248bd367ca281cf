package command

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/spf13/cobra"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

const (
	// appendFragmentRows: a direct append rolls over to a new fragment
	// past this many rows (all of them go in one commit).
	appendFragmentRows = 1 << 20
	// shardAppendLimit bounds what an append through a shard holds in
	// memory: one WAL entry takes every row of the invocation.
	shardAppendLimit = 256 << 20
)

func newAppend(env *Env) *cobra.Command {
	var shard string
	var ignoreUnknown bool
	c := &cobra.Command{
		Use:   "append URL FILE...",
		Short: "Append Parquet, CSV (with a header) or JSON-lines files, all or nothing",
		Long: `append reads each file by its extension (.parquet, .csv, .jsonl/.ndjson/.json),
matching its columns to the table's by name, checks every row, and appends
them all in one commit — or, with --shard ID, in one entry of that WAL
shard (which it then flushes and merges; a worker that owns the shard is
fenced). Either every row of every file is appended, or none is: a bad
value anywhere stops the command before anything is committed, with the
file, row and column.

Values: a null or a missing column is refused in a non-nullable column (in
CSV an empty field is a null); a column the table lacks is refused unless
--ignore-unknown-columns; types convert only without loss (narrower
integers, float32, dictionary-encoded strings).`,
		Example: `  strata append file://./events part-0.parquet part-1.parquet
  strata append file://./events events.csv --shard loader-1`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageError{fmt.Errorf("append needs a URL and at least one file\n\n%s", c.UsageString())}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			var size int64
			for _, path := range args[1:] {
				switch strings.ToLower(filepath.Ext(path)) {
				case ".parquet", ".csv", ".jsonl", ".ndjson", ".json":
				default:
					return usageError{fmt.Errorf("%s: unknown file type (want .parquet, .csv, .jsonl)", path)}
				}
				fi, err := os.Stat(path)
				if err != nil {
					return err
				}
				size += fi.Size()
			}
			if shard != "" && size > shardAppendLimit {
				return usageError{fmt.Errorf("%d bytes of input: an append through a shard holds every row in one WAL entry, at most %d bytes; append directly (without --shard)", size, shardAppendLimit)}
			}
			b, err := env.Open(ctx, args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			m, err := table.ReadLatest(ctx, b)
			if err != nil {
				return err
			}
			opts := ingest.Options{IgnoreUnknown: ignoreUnknown, Limit: max(size, 1) + 1}
			bar := newProgress(env.Err, "append", "bytes", size)
			rows := func(yield func(arrow.RecordBatch, error) bool) {
				for _, path := range args[1:] {
					for rec, err := range readFile(path, m.Schema(), opts) {
						if err != nil {
							yield(nil, fmt.Errorf("%s: %w", path, err))
							return
						}
						if !yield(rec, nil) {
							return
						}
					}
					if fi, err := os.Stat(path); err == nil {
						bar.Add(fi.Size())
					}
				}
			}
			var total int64
			if shard == "" {
				total, err = appendDirect(ctx, b, m.Schema(), rows)
			} else {
				total, err = appendThroughShard(ctx, b, shard, rows)
			}
			bar.Done()
			if err != nil {
				return fmt.Errorf("%w (nothing was appended)", err)
			}
			fmt.Fprintf(env.Out, "appended %d rows from %d files\n", total, len(args)-1)
			return nil
		},
	}
	c.Flags().StringVar(&shard, "shard", "", "append through this WAL shard instead of a direct commit")
	c.Flags().BoolVar(&ignoreUnknown, "ignore-unknown-columns", false, "drop input columns the table does not have instead of refusing the input")
	return c
}

// appendDirect streams rows into fragments and commits them all at once.
// On any error the fragments written are deleted and nothing is committed.
func appendDirect(ctx context.Context, b blob.Bucket, schema *arrow.Schema, rows iter.Seq2[arrow.RecordBatch, error]) (int64, error) {
	var frags []table.Fragment
	var w *table.FragmentWriter
	discard := func() {
		if w != nil {
			w.Abort()
		}
		for _, f := range frags {
			_ = b.Delete(context.WithoutCancel(ctx), f.Key)
		}
	}
	var total int64
	for rec, err := range rows {
		if err == nil && w == nil {
			w, err = table.NewFragmentWriter(ctx, b, schema)
		}
		if err == nil {
			err = w.Write(rec)
		}
		if err == nil && w.Rows() >= appendFragmentRows {
			var f table.Fragment
			f, err = w.Close()
			w = nil
			frags = append(frags, f)
		}
		if err != nil {
			discard()
			return 0, err
		}
		total += rec.NumRows()
	}
	if w != nil {
		f, err := w.Close()
		w = nil
		if err != nil {
			discard()
			return 0, err
		}
		frags = append(frags, f)
	}
	if len(frags) == 0 {
		return 0, nil
	}
	tb, err := commit.OpenTable(ctx, b, &commit.Options{Writer: "strata-append"})
	if err != nil {
		discard()
		return 0, err
	}
	_, err = tb.Commit(ctx, table.Transaction{Kind: table.KindAppend, CommitID: table.NewID(), Added: frags})
	if errors.Is(err, commit.ErrConflict) {
		discard() // a conflict means our manifest is not there
	}
	// Any other failure may hide a create that lands later: the objects
	// stay for garbage collection to judge.
	return total, err
}

// appendThroughShard gathers every row, then appends them in one WAL entry
// and drains the shard into the table.
func appendThroughShard(ctx context.Context, b blob.Bucket, shard string, rows iter.Seq2[arrow.RecordBatch, error]) (int64, error) {
	var recs []arrow.RecordBatch
	defer ingest.Release(recs)
	for rec, err := range rows {
		if err != nil {
			ingest.Release(recs)
			recs = nil
			return 0, err
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	s, err := walshard.Open(ctx, b, &walshard.Options{Shard: shard})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	if err := s.Append(ctx, recs...); err != nil {
		return 0, err
	}
	if err := s.Drain(ctx); err != nil {
		return 0, fmt.Errorf("the rows are in shard %s's WAL; merging them into the table failed (a restart of the shard replays them): %w", shard, err)
	}
	return ingest.Rows(recs), nil
}

// readFile yields a file's rows in batches of the table's schema.
func readFile(path string, schema *arrow.Schema, o ingest.Options) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		ext := strings.ToLower(filepath.Ext(path))
		if ext == ".parquet" {
			for rec, err := range ingest.ParquetFile(path, schema, o) {
				if !yield(rec, err) || err != nil {
					return
				}
			}
			return
		}
		f, err := os.Open(path)
		if err != nil {
			yield(nil, err)
			return
		}
		defer f.Close()
		seq := ingest.JSONLines(f, schema, o)
		if ext == ".csv" {
			seq = ingest.CSV(f, schema, o)
		}
		for rec, err := range seq {
			if !yield(rec, err) || err != nil {
				return
			}
		}
	}
}
