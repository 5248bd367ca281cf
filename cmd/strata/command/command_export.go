package command

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/internal/sibling"
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
			path, err := IcebergProgramPath()
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

// IcebergProgramPath finds strata-iceberg: beside the running executable (an
// install, the image), then on PATH.
func IcebergProgramPath() (string, error) {
	p, err := sibling.Find(IcebergProgram)
	if err != nil {
		return "", fmt.Errorf("strata export iceberg runs %w", err)
	}
	return p, nil
}

// LastLine is the last line of s.
func LastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
