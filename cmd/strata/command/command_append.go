package command

import (
	"context"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/spf13/cobra"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

const appendChunkRows = 65536

func newAppend(env *Env) *cobra.Command {
	var shard string
	c := &cobra.Command{
		Use:   "append URL FILE...",
		Short: "Append Parquet, CSV (with a header) or JSON-lines files",
		Long: `append reads each file by its extension (.parquet, .csv, .jsonl/.ndjson/.json)
with the table's schema and appends its rows: by default as direct commits
of up to 65,536 rows each; with --shard ID through that WAL shard (which it
then flushes and merges; a worker that owns the shard is fenced).`,
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
			// Check every file before appending any.
			for _, path := range args[1:] {
				switch strings.ToLower(filepath.Ext(path)) {
				case ".parquet", ".csv", ".jsonl", ".ndjson", ".json":
				default:
					return usageError{fmt.Errorf("%s: unknown file type (want .parquet, .csv, .jsonl)", path)}
				}
				if _, err := os.Stat(path); err != nil {
					return err
				}
			}
			b, err := env.Open(ctx, args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			sink, schema, finish, err := appendSink(ctx, b, shard)
			if err != nil {
				return err
			}
			var total, size int64
			for _, path := range args[1:] {
				if fi, err := os.Stat(path); err == nil {
					size += fi.Size()
				}
			}
			bar := newProgress(env.Err, "append", "bytes", size)
			for _, path := range args[1:] {
				for rec, err := range readFile(path, schema) {
					if err == nil {
						err = sink(rec)
						total += rec.NumRows()
						rec.Release()
					}
					if err != nil {
						return fmt.Errorf("%s: %w", path, err)
					}
				}
				if fi, err := os.Stat(path); err == nil {
					bar.Add(fi.Size())
				}
			}
			bar.Done()
			if err := finish(); err != nil {
				return err
			}
			fmt.Fprintf(env.Out, "appended %d rows from %d files\n", total, len(args)-1)
			return nil
		},
	}
	c.Flags().StringVar(&shard, "shard", "", "append through this WAL shard instead of direct commits")
	return c
}

// appendSink returns where rows go: direct commits, or a shard.
func appendSink(ctx context.Context, b blob.Bucket, shard string) (func(arrow.RecordBatch) error, *arrow.Schema, func() error, error) {
	if shard == "" {
		tb, err := commit.OpenTable(ctx, b, &commit.Options{Writer: "strata-append"})
		if err != nil {
			return nil, nil, nil, err
		}
		sink := func(rec arrow.RecordBatch) error {
			_, err := tb.Append(ctx, rec)
			return err
		}
		return sink, tb.Current().Manifest().Schema(), func() error { return nil }, nil
	}
	s, err := walshard.Open(ctx, b, walshard.Options{Shard: shard})
	if err != nil {
		return nil, nil, nil, err
	}
	finish := func() error {
		defer s.Close()
		return s.Drain(ctx)
	}
	return func(rec arrow.RecordBatch) error { return s.Append(ctx, rec) }, s.Schema(), finish, nil
}

// readFile yields a file's rows in batches of the table's schema.
func readFile(path string, schema *arrow.Schema) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		ext := strings.ToLower(filepath.Ext(path))
		if ext == ".parquet" {
			pf, err := file.OpenParquetFile(path, false)
			if err != nil {
				yield(nil, err)
				return
			}
			defer pf.Close()
			fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: appendChunkRows}, memory.DefaultAllocator)
			if err != nil {
				yield(nil, err)
				return
			}
			rr, err := fr.GetRecordReader(context.Background(), nil, nil)
			if err != nil {
				yield(nil, err)
				return
			}
			defer rr.Release()
			if err := table.CheckSchema(schema, rr.Schema()); err != nil {
				yield(nil, err)
				return
			}
			for rr.Next() {
				rec := rr.RecordBatch()
				rec.Retain()
				if !yield(rec, nil) {
					return
				}
			}
			if err := rr.Err(); err != nil {
				yield(nil, err)
			}
			return
		}
		f, err := os.Open(path)
		if err != nil {
			yield(nil, err)
			return
		}
		defer f.Close()
		var rd interface {
			Next() bool
			RecordBatch() arrow.RecordBatch
			Err() error
			Release()
		}
		switch ext {
		case ".csv":
			rd = csv.NewReader(f, schema, csv.WithHeader(true), csv.WithChunk(appendChunkRows), csv.WithNullReader(true, ""))
		case ".jsonl", ".ndjson", ".json":
			rd = array.NewJSONReader(f, schema, array.WithChunk(appendChunkRows))
		default:
			yield(nil, fmt.Errorf("%s: unknown file type %q", path, ext))
			return
		}
		defer rd.Release()
		for rd.Next() {
			rec := rd.RecordBatch()
			rec.Retain()
			if !yield(rec, nil) {
				return
			}
		}
		if err := rd.Err(); err != nil {
			yield(nil, err)
		}
	}
}
