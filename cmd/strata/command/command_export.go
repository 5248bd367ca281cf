package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/server"
)

func newExport(env *Env) *cobra.Command {
	c := &cobra.Command{
		Use:   "export",
		Short: "Describe a table in another format, in place (see: strata export iceberg)",
	}
	c.AddCommand(newExportIceberg(env))
	return c
}

// IcebergProgram is the program behind `strata export iceberg`: the
// Iceberg writer's libraries cost every program that links them about
// 120 ms and 32 MB at start-up, so the strata command runs it instead of
// linking it.
const IcebergProgram = "strata-iceberg"

// exitStatus is a program's exit status, passed on as strata's own.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func newExportIceberg(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "iceberg URL",
		Short: "Write Apache Iceberg metadata for the table's versions, so SQL engines read it",
		Long: `export iceberg runs strata-iceberg, found beside the strata executable or
on PATH, with the same arguments: strata export iceberg --help shows its
flags. It writes an Apache Iceberg (format v2) view of the table under
_iceberg/ in the table's own prefix and prints the metadata location.`,
		Example: `  strata export iceberg file://./strata-demo/rollouts
  strata export iceberg 's3://lake/rollouts?endpoint=http://127.0.0.1:9000' --version 42`,
		DisableFlagParsing: true,
		RunE: func(c *cobra.Command, args []string) error {
			path, err := icebergProgram()
			if err != nil {
				return err
			}
			cmd := exec.CommandContext(c.Context(), path, args...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, env.Out, env.Err
			err = cmd.Run()
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() > 0 {
				return exitStatus(ee.ExitCode()) // it said why
			}
			return err
		},
	}
}

// icebergProgram finds strata-iceberg: beside the running executable (an
// install, the image), then on PATH.
func icebergProgram() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), IcebergProgram)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(IcebergProgram); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("strata export iceberg runs %s, which is neither beside strata nor on PATH: install it with `go install github.com/stratadb/strata/cmd/%s@latest` (in a checkout: `go build -o $(dirname $(command -v strata)) ./cmd/%s`, or run `go run ./cmd/%s URL`); the image ships it",
		IcebergProgram, IcebergProgram, IcebergProgram, IcebergProgram)
}

// icebergExporter is strata serve's writer of a table's Iceberg view, for
// its catalog under /iceberg: it runs strata-iceberg on the table's URL,
// with --keep-versions and --retain from the policy the server's handle on
// the table has (the collection's defaults, as strata-iceberg's own and
// the Job's unless they were given others). What strata-iceberg says when
// it fails is logged, and its last line is the error.
func icebergExporter(log *slog.Logger) server.IcebergExport {
	return func(ctx context.Context, _ blob.Bucket, url string, gc engine.GCPolicy) error {
		path, err := icebergProgram()
		if err != nil {
			return err
		}
		args := []string{url}
		if gc.KeepVersions > 0 {
			args = append(args, "--keep-versions", strconv.Itoa(gc.KeepVersions))
		}
		if gc.RetainFor > 0 {
			args = append(args, "--retain", gc.RetainFor.String())
		}
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, path, args...)
		cmd.Stdout, cmd.Stderr = io.Discard, &out
		if err := cmd.Run(); err != nil {
			msg := strings.TrimSpace(out.String())
			log.Warn("strata-iceberg failed", "url", url, "error", err.Error(), "output", msg)
			if msg != "" {
				return fmt.Errorf("%s: %s", IcebergProgram, lastLine(msg))
			}
			return fmt.Errorf("%s: %w", IcebergProgram, err)
		}
		return nil
	}
}

// lastLine is the last line of s.
func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
