// Package command implements the table verbs of the strata command-line
// tool, which strata-engine runs; package servecmd adds serve and token
// for strata-full.
// Exit codes: 0 success, 1 failure, 2 usage, 3 a write whose outcome is
// unknown (it may have been stored): engine.ExitCode, from the error's
// code (engine.Code), as the server answers it.
package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/harness/rollouts"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/internal/policyflag"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

// Env is what the verbs need from outside: where to print, and how to open
// a bucket URL (tests swap in wrapped buckets).
type Env struct {
	Out, Err io.Writer
	Open     func(ctx context.Context, url string) (blob.Bucket, error)
	// In is what a FILE of "-" reads (nil: nothing).
	In io.Reader
}

// usageError marks errors that exit with status 2.
type usageError struct{ error }

// Main runs the tool with args and returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	return Run(args, &Env{Out: stdout, Err: stderr, Open: blob.Open, In: os.Stdin})
}

// Run runs the tool with an explicit Env.
func Run(args []string, env *Env) int {
	return RunRoot(args, env, newRoot)
}

// UsageError marks err as a usage error: RunRoot exits with status 2.
func UsageError(err error) error { return usageError{err} }

// RunRoot runs the command newRoot builds with args, as Run runs strata's:
// the same bucket opening, messages and exit codes. Programs that carry a
// verb the strata binary does not link (strata-iceberg) run it so.
func RunRoot(args []string, env *Env, newRoot func(*Env) *cobra.Command) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The bucket URL a command opened last, to name it where the error
	// alone would not say which table is missing.
	var opened string
	e := *env
	e.Open = func(ctx context.Context, u string) (blob.Bucket, error) {
		opened = u
		return env.Open(ctx, u)
	}
	root := newRoot(&e)
	root.SetArgs(args)
	root.SetOut(env.Out)
	root.SetErr(env.Err)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	if es := exitStatus(0); errors.As(err, &es) {
		return int(es) // another program's, which printed its own error
	}
	msg := err.Error()
	if errors.Is(err, format.ErrNotFound) && opened != "" {
		msg = strings.Replace(msg, format.ErrNotFound.Error(), "no table at "+opened, 1)
	}
	if errors.Is(err, format.ErrVersionNotFound) && opened != "" {
		msg += versionsThere(ctx, env, opened)
	}
	fmt.Fprintln(env.Err, "strata:", msg)
	if ue := (usageError{}); errors.As(err, &ue) || cli.IsCobraUsage(err) {
		return 2
	}
	// 3 when the rows may be stored (a script that retries could store
	// them twice), else 1: by the error's code, as the server answers it.
	return engine.ExitCode(err)
}

// NewRoot builds the strata command with command's verbs and those more
// makes (servecmd's serve and token, in the programs that link the
// server).
func NewRoot(env *Env, more ...func(*Env) *cobra.Command) *cobra.Command {
	root := newRoot(env)
	for _, m := range more {
		root.AddCommand(m(env))
	}
	return root
}

func newRoot(env *Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "strata",
		Short: "Strata keeps tables in an object store: Parquet fragments and numbered manifests",
		Long: `Strata keeps tables in an object store (S3, GCS, MinIO, a local folder) as
immutable Parquet fragments and numbered manifests, with no server to run.

Bucket URLs: file:///abs/path, file://./rel/path, ./rel/path, mem://,
s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1,
gs://bucket/prefix. S3 credentials come from AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY and AWS_REGION.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// The flags that deployments set from the environment (STRATA_SERVER,
	// STRATA_TOKEN, STRATA_INSTANCE, and the compaction policy's, such as
	// STRATA_MIN_FRAGMENTS and STRATA_QUIET_WINDOWS, shared with
	// strata-compactor), read as strata-compactor reads all of its own: a
	// flag on the command line wins.
	root.PersistentPreRunE = func(c *cobra.Command, args []string) error {
		names := append([]string{"server", "token", "instance", "ca", "client-cert", "client-key"}, policyflag.Names...)
		if err := cli.Prepare(c.Flags(), os.Environ(), names...); err != nil {
			return usageError{err}
		}
		return nil
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w\n\n%s", cli.FlagValueError(c.Flags(), err), c.UsageString())}
	})
	root.AddCommand(newSelftest(env), newBench(env), newDemo(env), newScan(env), newCount(env), newTake(env), newVersions(env), newChanges(env), newFollow(env), newRestore(env),
		newTag(env), newInspect(env), newStats(env), newCompact(env), newGC(env), newRepair(env), newWorker(env),
		newCreate(env), newAppend(env), newUpsert(env), newOverwrite(env), newUpdate(env), newAlter(env), newVersion(env), newTables(env), newDelete(env), newIndex(env), newExport(env), newCopy(env))
	root.AddCommand(lsmVerbs(env)...)
	return root
}

// AtLeast declares that each named numeric flag of c takes values from lo
// up: a value below is a usage error before the verb runs (cli.Bound).
func AtLeast(c *cobra.Command, lo int64, names ...string) {
	for _, n := range names {
		cli.Bound(c.Flags(), n, lo, cli.Unlimited)
	}
}

// maxWorker is the largest worker number: ids are worker*IDBase + seq, and
// must fit an int64.
const maxWorker = math.MaxInt64/rollouts.IDBase - 1

// ExactArgs is cobra.ExactArgs with a usage error.
func ExactArgs(n int) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s takes %d argument(s), got %d\n\n%s", c.Name(), n, len(args), c.UsageString())}
		}
		return nil
	}
}

// versionsThere says which versions the table at u has, for an error
// naming one it has not: its newest, and where to see the others.
func versionsThere(ctx context.Context, env *Env, u string) string {
	b, err := env.Open(ctx, u)
	if err != nil {
		return ""
	}
	defer b.Close()
	latest, err := table.LatestVersion(ctx, b)
	if err != nil {
		return ""
	}
	return fmt.Sprintf(" (the table's newest version is %d; garbage collection deletes old ones: strata versions %s lists those there are)", latest, u)
}
