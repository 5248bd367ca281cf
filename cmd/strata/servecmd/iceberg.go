package servecmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/cmd/strata/command"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/server"
)

// icebergExporter is strata serve's writer of a table's Iceberg view, for
// its catalog under /iceberg: it runs strata-iceberg on the table's URL,
// with --keep-versions and --retain from the policy the server's handle on
// the table has (the collection's defaults, as strata-iceberg's own and
// the Job's unless they were given others). What strata-iceberg says when
// it fails is logged, and its last line is the error.
func icebergExporter(log *slog.Logger) server.IcebergExport {
	return func(ctx context.Context, _ blob.Bucket, url string, gc engine.GCPolicy) error {
		path, err := command.IcebergProgramPath()
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
				return fmt.Errorf("%s: %s", command.IcebergProgram, command.LastLine(msg))
			}
			return fmt.Errorf("%s: %w", command.IcebergProgram, err)
		}
		return nil
	}
}
