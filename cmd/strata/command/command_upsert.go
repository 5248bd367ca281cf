package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/spf13/cobra"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// upsertLimit bounds the input of one upsert: its rows are held in memory
// (their keys are read before the commit).
const upsertLimit = 1 << 30

func newUpsert(env *Env) *cobra.Command {
	var keys, shard, format string
	var ignoreUnknown bool
	var cl clauseFlags
	c := &cobra.Command{
		Use:   "upsert URL FILE... --key COLUMN[,COLUMN...] (- for standard input, with --format)",
		Short: "Write rows that replace the table's rows with the same key, in one commit",
		Long: `upsert reads the files as append does (.parquet, .csv, .jsonl), and in one
commit writes their rows and deletes every row of the table whose key — its
values in the --key columns — one of them has: each key of the input ends
with the input's row, and the other rows are inserted. A key must not be
null nor appear twice in the input; a key column holds integers, strings,
binaries, booleans, dates or timestamps.

With --shard ID the rows go in one entry of that WAL shard, as append
--shard's do, and the shard is then merged: the merge replaces the rows
with their keys. A shard's upserts replace each other in the order they
were acknowledged; across shards and direct upserts, the upsert merged or
committed last wins.

The --when-… flags make it SQL's MERGE statement, in one commit:
--when-matched ignore inserts only the keys the table lacks;
--when-not-matched ignore updates only the keys it has; --when-matched-if
'target.step < source.step' updates a key's rows only where that holds of
the pair; --when-not-matched-by-source delete also deletes the table's rows
whose key the files lack (--when-not-matched-by-source-if narrows them).

Upserts racing each other leave one row per key, that of the upsert that
committed last. Rows appended (not upserted) may share a key. Rows not yet
merged from a writer's shard are not seen: run a checkpoint first. Running
the same command again is safe: the rows replace themselves. At most 1 GiB
of input, held in memory.`,
		Example: `  strata upsert file://./events rewards.jsonl --key id
  strata upsert file://./events fixes.csv --key run,step
  strata upsert file://./events rewards.jsonl --key id --shard grader-1
  strata upsert file://./events new.jsonl --key id --when-matched ignore
  strata upsert file://./events rewards.jsonl --key id --when-matched-if 'target.step < source.step'
  strata upsert file://./events snapshot.csv --key id --when-not-matched-by-source delete`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageError{fmt.Errorf("upsert needs a URL and at least one file\n\n%s", c.UsageString())}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			var cols []string
			for _, k := range strings.Split(keys, ",") {
				if k = strings.TrimSpace(k); k != "" {
					cols = append(cols, k)
				}
			}
			if len(cols) == 0 {
				return usageError{errors.New("upsert needs --key: the column (or columns, comma-separated) that identify a row")}
			}
			in, err := takeInput(env, args[1:], format)
			if err != nil {
				return err
			}
			defer in.remove()
			clauses, given, err := cl.clauses(c)
			if err != nil {
				return err
			}
			if given && shard != "" {
				return usageError{errors.New("--when-… clauses commit to the table directly: not with --shard (a shard's upserts replace their keys' rows, and nothing else)")}
			}
			if given {
				return runUpsertWith(c.Context(), env, args[0], in, cols, clauses, ignoreUnknown)
			}
			return runUpsert(c.Context(), env, args[0], in, cols, shard, ignoreUnknown)
		},
	}
	c.Flags().StringVar(&keys, "key", "", "the key column, or columns comma-separated (required)")
	c.Flags().StringVar(&shard, "shard", "", "upsert through this WAL shard (acknowledged once in its WAL, then merged) instead of a direct commit")
	c.Flags().BoolVar(&ignoreUnknown, "ignore-unknown-columns", false, "drop input columns the table does not have instead of refusing the input")
	c.Flags().StringVar(&format, "format", "", "csv, jsonl or parquet: the format of standard input (-), or of files whose names do not say")
	cl.declare(c)
	return c
}

// runUpsert upserts the rows of files into the table at u by the key
// columns cols: through shard when given, else in one direct commit.
func runUpsert(ctx context.Context, env *Env, u string, files *input, cols []string, shard string, ignoreUnknown bool) (err error) {
	in, err := holdInput(files, ignoreUnknown, "upserted")
	if err != nil {
		return err
	}
	defer in.release()
	b, err := env.Open(ctx, u)
	if err != nil {
		return err
	}
	defer b.Close()
	if shard != "" {
		m, err := table.ReadLatest(ctx, b)
		if err != nil {
			return err
		}
		if err := in.read(m.Schema()); err != nil {
			return err
		}
		ack, err := upsertThroughShard(ctx, b, shard, cols, in.recs)
		if err != nil {
			return in.named(err)
		}
		fmt.Fprintf(env.Out, "upserted %d rows through shard %s's WAL entry %d, merged into the table\n", ack.Rows, shard, ack.Position)
		return nil
	}
	tb, err := handle(b)
	if err != nil {
		return err
	}
	defer closeDB(tb, &err)
	res, err := tb.Upsert(ctx, cols, in.rows(nil))
	err = in.named(err)
	switch {
	case in.err != nil:
		return in.err
	case errors.Is(err, engine.ErrOutcomeUnknown):
		return fmt.Errorf("%w; run the same command again: the rows replace themselves", err)
	case err != nil:
		return fmt.Errorf("%w (nothing was upserted)", err)
	}
	if res.Done {
		fmt.Fprintf(env.Out, "no rows; nothing committed (version %d)\n", res.Version)
		return nil
	}
	fmt.Fprintf(env.Out, "upserted %d rows, replacing %d (version %d)\n", res.Inserted, res.Replaced, res.Version)
	return nil
}

// clauseFlags are upsert's --when-… flags, as SQL's MERGE statement has
// them.
type clauseFlags struct {
	matched, notMatched, bySource string
	matchedIf, bySourceIf         string
}

func (f *clauseFlags) declare(c *cobra.Command) {
	fs := c.Flags()
	fs.StringVar(&f.matched, "when-matched", "update", "a row whose key the table has: update (replace that key's rows) or ignore")
	fs.StringVar(&f.matchedIf, "when-matched-if", "", "update only where this holds of the pair: target.COL (or COL) the table's row, source.COL the file's, e.g. 'target.step < source.step'")
	fs.StringVar(&f.notMatched, "when-not-matched", "insert", "a row whose key the table lacks: insert or ignore")
	fs.StringVar(&f.bySource, "when-not-matched-by-source", "keep", "the table's rows whose key the files lack: keep or delete")
	fs.StringVar(&f.bySourceIf, "when-not-matched-by-source-if", "", "delete only those where this holds of them, e.g. \"run = 'r1'\"")
}

// clauses are the flags as the engine takes them; given is false when no
// --when-… flag was set (a plain upsert).
func (f *clauseFlags) clauses(c *cobra.Command) (engine.UpsertClauses, bool, error) {
	var given bool
	for _, n := range []string{"when-matched", "when-matched-if", "when-not-matched", "when-not-matched-by-source", "when-not-matched-by-source-if"} {
		given = given || c.Flags().Changed(n)
	}
	out := engine.UpsertClauses{MatchedIf: f.matchedIf, BySourceIf: f.bySourceIf}
	for _, o := range []struct {
		flag, v, yes, no string
		to               *bool
	}{
		{"--when-matched", f.matched, "update", "ignore", &out.UpdateMatched},
		{"--when-not-matched", f.notMatched, "insert", "ignore", &out.InsertUnmatched},
		{"--when-not-matched-by-source", f.bySource, "delete", "keep", &out.DeleteUnmatchedBySource},
	} {
		switch o.v {
		case o.yes:
			*o.to = true
		case o.no:
		default:
			return out, given, usageError{fmt.Errorf("%s %q: want %s or %s", o.flag, o.v, o.yes, o.no)}
		}
	}
	if out.MatchedIf != "" && !out.UpdateMatched {
		return out, given, usageError{errors.New("--when-matched-if conditions an update: not with --when-matched ignore")}
	}
	if out.BySourceIf != "" && !out.DeleteUnmatchedBySource {
		return out, given, usageError{errors.New("--when-not-matched-by-source-if conditions a delete: give --when-not-matched-by-source delete")}
	}
	return out, given, nil
}

// runUpsertWith upserts the rows of files into the table at u by the key
// columns cols as the clauses say, in one direct commit.
func runUpsertWith(ctx context.Context, env *Env, u string, files *input, cols []string, c engine.UpsertClauses, ignoreUnknown bool) (err error) {
	in, err := holdInput(files, ignoreUnknown, "upserted")
	if err != nil {
		return err
	}
	defer in.release()
	tb, err := openHandle(ctx, env, u)
	if err != nil {
		return err
	}
	defer closeDB(tb, &err)
	res, err := tb.UpsertWith(ctx, cols, c, in.rows(nil))
	err = in.named(err)
	switch {
	case in.err != nil:
		return in.err
	case errors.Is(err, engine.ErrBadClauses):
		return usageError{err}
	case errors.Is(err, engine.ErrOutcomeUnknown):
		return fmt.Errorf("%w; see `strata versions` for whether it landed before running it again (a delete of the rows the files lack, run again, deletes what was written since)", err)
	case err != nil:
		return fmt.Errorf("%w (nothing was upserted)", err)
	case res.Done:
		fmt.Fprintf(env.Out, "nothing to change; nothing committed (version %d)\n", res.Version)
	default:
		fmt.Fprintf(env.Out, "upserted: %d rows inserted, %d updated (replacing %d), %d deleted (version %d)\n", res.Inserted, res.Updated, res.Replaced, res.Deleted, res.Version)
	}
	return nil
}

// heldInput is the rows of the files a verb that commits them directly
// (upsert, overwrite) reads, held in memory: at most upsertLimit bytes.
type heldInput struct {
	in   *input
	opts ingest.Options
	done string // what the verb did, for "nothing was upserted"
	recs []arrow.RecordBatch
	err  error       // the files' refusal, when they were read
	segs []inputFile // where each file's rows are among recs
}

// inputFile is one file's rows among a heldInput's: from row start, rows
// of them, on lines (nil: not a text file).
type inputFile struct {
	name        string
	start, rows int64
	lines       *ingest.Lines
}

func holdInput(files *input, ignoreUnknown bool, done string) (*heldInput, error) {
	size, err := files.size()
	if err != nil {
		return nil, err
	}
	if size > upsertLimit {
		return nil, usageError{fmt.Errorf("%d bytes of input: the rows are held in memory, at most %d bytes; split the input", size, upsertLimit)}
	}
	return &heldInput{in: files, done: done, opts: ingest.Options{IgnoreUnknown: ignoreUnknown, Limit: max(size, 1) + 1}}, nil
}

// read reads the files' rows under schema.
func (in *heldInput) read(schema *arrow.Schema) error {
	var row int64
	for _, path := range in.in.files {
		f := inputFile{name: in.in.name(path), start: row, lines: &ingest.Lines{}}
		opts := in.opts
		opts.Lines = f.lines
		for rec, err := range readFile(path, in.in.formatOf(path), schema, opts, nil) {
			if err != nil {
				in.err = fmt.Errorf("%s: %w (nothing was %s)", f.name, err, in.done)
				return in.err
			}
			rec.Retain()
			in.recs = append(in.recs, rec)
			row += rec.NumRows()
		}
		f.rows = row - f.start
		in.segs = append(in.segs, f)
	}
	return nil
}

// named is err, a refusal of a row of the held rows found after they were
// read (a key twice, or null), naming the file and the line the row is on
// (the row within the file, when it is no text file).
func (in *heldInput) named(err error) error {
	var ie *evolve.InputError
	if !errors.As(err, &ie) || ie.Row < 0 || ie.Line != 0 {
		return err
	}
	for _, f := range in.segs {
		if ie.Row >= f.start && ie.Row < f.start+f.rows {
			ie.Row -= f.start
			if len(f.lines.Of) == int(f.rows) {
				err = ingest.AtLine(err, f.lines)
			}
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return err
}

// rows is read as the engine asks for a direct write's rows, named key.
func (in *heldInput) rows(key *format.Idempotency) engine.RowsReader {
	return func(schema *arrow.Schema) ([]arrow.RecordBatch, *format.Idempotency, error) {
		if err := in.read(schema); err != nil {
			return nil, nil, err
		}
		return in.recs, key, nil
	}
}

func (in *heldInput) release() { ingest.Release(in.recs) }

// upsertThroughShard upserts recs by keys in one WAL entry of shard and
// drains the shard into the table.
func upsertThroughShard(ctx context.Context, b blob.Bucket, shard string, keys []string, recs []arrow.RecordBatch) (_ engine.Ack, err error) {
	db, err := engine.Open(ctx, b, &engine.Options{Writer: "strata upsert", Shard: engine.ShardOptions{Shard: shard}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return engine.Ack{}, err
	}
	defer closeDB(db, &err)
	ack, err := db.Append(ctx, engine.AppendOptions{Keys: keys}, recs...)
	if err != nil {
		return ack, fmt.Errorf("%w (nothing was upserted)", err)
	}
	if err := db.Drain(ctx); err != nil {
		return ack, fmt.Errorf("the rows are in shard %s's WAL; merging them into the table failed (a restart of the shard replays them): %w", shard, err)
	}
	return ack, nil
}
