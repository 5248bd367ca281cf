package command

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/spf13/cobra"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// shardAppendLimit bounds what an append through a shard holds in memory:
// one WAL entry takes every row of the invocation.
const shardAppendLimit = 256 << 20

func newAppend(env *Env) *cobra.Command {
	var shard, key, format string
	var ignoreUnknown, noKey, again bool
	var srv remote
	c := &cobra.Command{
		Use:   "append URL FILE... | append TABLE FILE... --server URL (- for standard input, with --format)",
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
integers, float32, dictionary-encoded strings).

A FILE of - reads standard input, in the --format given (csv or jsonl);
--format also reads files whose names do not say their format.

Run again: an append is named by an idempotency key — by default one
derived from the files themselves (each one's path, size, modification
time and bytes, and --ignore-unknown-columns), or --idempotency-key KEY —
recorded with the rows. Running the same command again after it failed,
or after it was killed, whatever it had done, appends the rows at most
once: when the table (or the shard) records the key, it says so and
appends nothing. Another file with the same bytes, or the same file
written again (a new modification time), appends. Keys are remembered for
an hour (at most 1,000 per table, or per shard); --again appends the same
files again on purpose. Standard input has no default key: without
--idempotency-key, every run appends.

With --server, append sends the rows to the table TABLE of a strata serve,
in one request named by the same key (https:// with --ca for a certificate
signed by a CA of your own).`,
		Example: `  strata append file://./events part-0.parquet part-1.parquet
  strata append file://./events events.csv --shard loader-1
  strata append file://./events day-1.jsonl --idempotency-key import-day-1
  generate-rows | strata append file://./events - --format jsonl
  strata append events day-1.jsonl --server https://strata:8443 --ca ca.pem`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageError{fmt.Errorf("append needs a URL and at least one file\n\n%s", c.UsageString())}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			in, err := takeInput(env, args[1:], format)
			if err != nil {
				return err
			}
			defer in.remove()
			f := appendFlags{shard: shard, key: key, ignoreUnknown: ignoreUnknown, noKey: noKey || again}
			if f.noKey && f.key != "" {
				return usageError{errors.New("give --idempotency-key or --no-idempotency-key, not both")}
			}
			if srv.remote(args[0]) {
				return appendRemote(c.Context(), env, &srv, args[0], in, f)
			}
			return runAppend(c.Context(), env, args[0], in, f)
		},
	}
	c.Flags().StringVar(&shard, "shard", "", "append through this WAL shard instead of a direct commit")
	c.Flags().BoolVar(&ignoreUnknown, "ignore-unknown-columns", false, "drop input columns the table does not have instead of refusing the input")
	c.Flags().StringVar(&key, "idempotency-key", "", "name the append with this key (default: one derived from the files: path, size, modification time and bytes)")
	c.Flags().BoolVar(&again, "again", false, "append the files even if this command appended them within the hour")
	c.Flags().BoolVar(&noKey, "no-idempotency-key", false, "append without a key (as --again)")
	c.Flags().StringVar(&format, "format", "", "csv, jsonl or parquet: the format of standard input (-), or of files whose names do not say")
	srv.flags(c.Flags())
	return c
}

// appendFlags are append's flags.
type appendFlags struct {
	shard, key           string
	ignoreUnknown, noKey bool
}

// runAppend appends the rows of the input's files to the table at u.
func runAppend(ctx context.Context, env *Env, u string, in *input, f appendFlags) error {
	files := in.files
	size, err := in.size()
	if err != nil {
		return err
	}
	if f.shard != "" && size > shardAppendLimit {
		return usageError{fmt.Errorf("%d bytes of input: an append through a shard holds every row in one WAL entry, at most %d bytes; append directly (without --shard)", size, shardAppendLimit)}
	}
	b, err := env.Open(ctx, u)
	if err != nil {
		return err
	}
	defer b.Close()
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		return err
	}
	var k *format.Idempotency
	if !f.noKey && (f.key != "" || !in.stdin) {
		if k, err = appendKey(files, f.key, f.ignoreUnknown); err != nil {
			return err
		}
	}
	opts := ingest.Options{IgnoreUnknown: f.ignoreUnknown, Limit: max(size, 1) + 1}
	bar := newProgress(env.Err, "append", "bytes", size)
	rows := func(yield func(arrow.RecordBatch, error) bool) {
		for _, path := range files {
			for rec, err := range readFile(path, in.formatOf(path), m.Schema(), opts, bar.Add) {
				if err != nil {
					yield(nil, fmt.Errorf("%s: %w", in.name(path), err))
					return
				}
				if !yield(rec, nil) {
					return
				}
			}
		}
	}
	var done appended
	if k != nil {
		// The table records a name whichever way the rows came: directly
		// or merged from any shard.
		if o, found, err := m.Producers.Lookup(k.Key(0, time.Now())); err != nil {
			return fmt.Errorf("%w (nothing was appended)", err)
		} else if found {
			fmt.Fprintf(env.Out, "already appended: version %d holds these %d rows (%s); nothing appended\n%s", o.At, o.Rows, keyOrigin(k, f.key), againHint)
			return nil
		}
	}
	if f.shard == "" {
		done, err = appendDirect(ctx, b, m, k, rows)
	} else {
		done, err = appendThroughShard(ctx, b, f.shard, k, rows)
	}
	bar.Done()
	switch {
	case err != nil && k != nil && (errors.Is(err, engine.ErrOutcomeUnknown) || errors.Is(err, engine.ErrAppendUnknown)):
		return fmt.Errorf("%w; run the same command again: it appends the rows once (idempotency key %s)", err, k.Producer)
	case err != nil:
		return fmt.Errorf("%w (nothing was appended)", err)
	case done.duplicate:
		fmt.Fprintf(env.Out, "already appended: %s holds these %d rows (%s); nothing appended\n%s", done.at, done.rows, keyOrigin(k, f.key), againHint)
	default:
		fmt.Fprintf(env.Out, "appended %d rows from %d files\n", done.rows, len(files))
	}
	return nil
}

// appended is what an append did: rows stored at at, or, for a duplicate,
// found stored there already.
type appended struct {
	rows      int64
	at        string
	duplicate bool
}

// againHint is what a skipped append adds: how long names are kept, and
// how to append anyway.
const againHint = "(an append's name is kept for an hour, at most 1,000 per table; run with --again to append these rows once more)\n"

// keyOrigin says where an append's name came from.
func keyOrigin(k *format.Idempotency, key string) string {
	if key != "" {
		return "idempotency key " + key
	}
	return "the same files, by path, size, modification time and bytes, were appended under this name: " + k.Producer
}

// appendKey names an append of files: by key when given, else by the
// files themselves — each one's absolute path, size, modification time
// and bytes, so that only the same files appended again are a retry; its
// digest is the files' bytes' either way.
func appendKey(files []string, key string, ignoreUnknown bool) (*format.Idempotency, error) {
	name := sha256.New() // what the files are
	body := sha256.New() // what they hold
	fmt.Fprintf(name, "strata append v2 ignore-unknown=%v\n", ignoreUnknown)
	fmt.Fprintf(body, "strata append v1 ignore-unknown=%v\n", ignoreUnknown)
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		fi, err := f.Stat()
		if err == nil {
			abs, _ := filepath.Abs(path)
			fmt.Fprintf(name, "%q %d %d\n", abs, fi.Size(), fi.ModTime().UnixNano())
			fmt.Fprintf(body, "%d\n", fi.Size())
			_, err = io.Copy(io.MultiWriter(name, body), f)
		}
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	id, sum := name.Sum(nil), body.Sum(nil)
	k := &format.Idempotency{Producer: "strata-append:" + hex.EncodeToString(id[:16]), Digest: max(binary.LittleEndian.Uint64(sum[16:]), 1)}
	if key != "" {
		k.Producer = "key:" + key
	}
	return k, k.Check()
}

// appendDirect streams rows into fragments and commits them all at once
// (engine.DB.AppendStream), named by key when not nil; an append whose key
// a racing commit recorded first is a duplicate (its caller looked the key
// up before).
func appendDirect(ctx context.Context, b blob.Bucket, m *format.Manifest, key *format.Idempotency, rows iter.Seq2[arrow.RecordBatch, error]) (_ appended, err error) {
	db, err := engine.OpenNew(b, &engine.Options{Writer: "strata", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return appended{}, err
	}
	defer closeDB(db, &err)
	ack, err := db.AppendStream(ctx, engine.StreamOptions{Key: key}, m.Schema(), rows)
	if err != nil {
		return appended{}, err
	}
	return appended{rows: ack.Rows, at: fmt.Sprintf("version %d", ack.Version), duplicate: ack.Duplicate}, nil
}

// appendThroughShard gathers every row, then appends them in one WAL entry
// (named by key when not nil) and drains the shard into the table.
func appendThroughShard(ctx context.Context, b blob.Bucket, shard string, key *format.Idempotency, rows iter.Seq2[arrow.RecordBatch, error]) (_ appended, err error) {
	var recs []arrow.RecordBatch
	defer func() { ingest.Release(recs) }()
	for rec, err := range rows {
		if err != nil {
			return appended{}, err
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	db, err := engine.Open(ctx, b, &engine.Options{Writer: "strata append", Shard: engine.ShardOptions{Shard: shard}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return appended{}, err
	}
	defer closeDB(db, &err)
	ack, err := db.Append(ctx, engine.AppendOptions{Key: key, Conformed: true}, recs...)
	if err != nil {
		return appended{}, err
	}
	if err := db.Drain(ctx); err != nil {
		return appended{}, fmt.Errorf("the rows are in shard %s's WAL; merging them into the table failed (a restart of the shard replays them): %w", shard, err)
	}
	return appended{rows: ack.Rows, at: fmt.Sprintf("shard %s's WAL entry %d", shard, ack.Position), duplicate: ack.Duplicate}, nil
}

// readFile yields the rows of a file in format (csv, jsonl, parquet) in
// batches of the table's schema; read, when not nil, is told of the file's
// bytes as they are read (a Parquet file's once it is read).
func readFile(path, ext string, schema *arrow.Schema, o ingest.Options, read func(int64)) iter.Seq2[arrow.RecordBatch, error] {
	if read == nil {
		read = func(int64) {}
	}
	return func(yield func(arrow.RecordBatch, error) bool) {
		if ext == "parquet" {
			for rec, err := range ingest.ParquetFile(path, schema, o) {
				if !yield(rec, err) || err != nil {
					return
				}
			}
			if fi, err := os.Stat(path); err == nil {
				read(fi.Size())
			}
			return
		}
		f, err := os.Open(path)
		if err != nil {
			yield(nil, err)
			return
		}
		defer f.Close()
		r := io.Reader(&countingReader{r: f, read: read})
		seq := ingest.JSONLines(r, schema, o)
		if ext == "csv" {
			seq = ingest.CSV(r, schema, o)
		}
		for rec, err := range seq {
			if !yield(rec, err) || err != nil {
				return
			}
		}
	}
}

// countingReader tells read of the bytes it reads.
type countingReader struct {
	r    io.Reader
	read func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read(int64(n))
	return n, err
}
