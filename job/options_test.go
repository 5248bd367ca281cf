package job_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/job"
)

// A Job asked to keep the Iceberg view with no exporter to keep it with is
// refused before its first pass (the engine links no Iceberg writer: the
// program that exports passes one), not run and failed table by table.
func TestIcebergWithoutAnExporterIsRefused(t *testing.T) {
	o := &job.Options{Tables: []string{"mem://"}, Iceberg: true, NoGC: true}
	if err := o.Validate(); !errors.Is(err, engine.ErrInvalidOptions) {
		t.Fatalf("Iceberg without Export: %v, want engine.ErrInvalidOptions", err)
	}
	if _, err := job.RunOnce(ctx, o); !errors.Is(err, engine.ErrInvalidOptions) {
		t.Fatalf("a pass with Iceberg and no Export: %v, want engine.ErrInvalidOptions", err)
	}
	o.Export = func(context.Context, blob.Bucket, string, engine.GCPolicy, time.Time) (engine.IcebergOutcome, error) {
		return engine.IcebergOutcome{}, nil
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("Iceberg with an Export: %v", err)
	}
}
