package compactor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/table"
)

// JobOptions configure the singleton compactor Job (strata-compactor).
type JobOptions struct {
	Tables   []string // table URLs
	Policy   Policy
	GC       GCPolicy
	NoGC     bool
	LeaseTTL time.Duration // default 30m
	Holder   string        // who holds the lease (default: "strata-compactor")
	DryRun   bool
	// History is how many run records to keep per table (default 100).
	History int
	Log     *slog.Logger
	Open    func(ctx context.Context, url string) (blob.Bucket, error) // default blob.Open
	Now     func() time.Time                                           // default time.Now
}

// TableOutcome is what one pass did to one table.
type TableOutcome struct {
	Table           string
	Skipped         string // why nothing ran (lease held, not due)
	Compacted       bool
	FragmentsBefore int
	FragmentsAfter  int
	VersionsDeleted int
	ObjectsDeleted  int
	BytesFreed      int64
	Err             error
}

// Summary is one pass over every table.
type Summary struct {
	Tables, Compacted, Skipped, Failed int
	FragmentsBefore, FragmentsAfter    int
	VersionsDeleted, ObjectsDeleted    int
	Outcomes                           []TableOutcome
}

func (o *JobOptions) defaults() {
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 30 * time.Minute
	}
	if o.Holder == "" {
		o.Holder = "strata-compactor"
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Open == nil {
		o.Open = blob.Open
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// RunOnce makes one pass: for each table, take the lease, compact if due,
// record the run, collect garbage, and release the lease. A table whose
// lease another Job holds is skipped, not failed. The error joins the
// tables' failures.
func RunOnce(ctx context.Context, o JobOptions) (Summary, error) {
	o.defaults()
	var sum Summary
	var errs []error
	for _, u := range o.Tables {
		out := runTable(ctx, o, u)
		sum.Outcomes = append(sum.Outcomes, out)
		sum.Tables++
		sum.FragmentsBefore += out.FragmentsBefore
		sum.FragmentsAfter += out.FragmentsAfter
		sum.VersionsDeleted += out.VersionsDeleted
		sum.ObjectsDeleted += out.ObjectsDeleted
		switch {
		case out.Err != nil:
			sum.Failed++
			errs = append(errs, fmt.Errorf("%s: %w", u, out.Err))
		case out.Compacted:
			sum.Compacted++
		case out.Skipped != "":
			sum.Skipped++
		}
	}
	o.Log.Info("summary", "tables", sum.Tables, "compacted", sum.Compacted, "skipped", sum.Skipped, "failed", sum.Failed,
		"fragments_before", sum.FragmentsBefore, "fragments_after", sum.FragmentsAfter,
		"versions_deleted", sum.VersionsDeleted, "objects_deleted", sum.ObjectsDeleted)
	return sum, errors.Join(errs...)
}

// Loop runs a pass every interval until ctx ends; failures are logged and
// the next pass goes on.
func Loop(ctx context.Context, o JobOptions, interval time.Duration) error {
	o.defaults()
	for {
		if _, err := RunOnce(ctx, o); err != nil {
			o.Log.Error("pass failed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

func runTable(ctx context.Context, o JobOptions, u string) (out TableOutcome) {
	out.Table = u
	log := o.Log.With("table", u)
	b, err := o.Open(ctx, u)
	if err != nil {
		out.Err = err
		log.Error("open failed", "error", err.Error())
		return out
	}
	defer b.Close()
	now := o.Now()
	var lease Lease
	if !o.DryRun {
		lease, err = AcquireLease(ctx, b, o.Holder, o.LeaseTTL, now)
		if errors.Is(err, ErrLeaseHeld) {
			out.Skipped = err.Error()
			log.Info("skipped", "reason", out.Skipped)
			return out
		}
		if err != nil {
			out.Err = err
			log.Error("lease failed", "error", err.Error())
			return out
		}
		defer func() {
			if err := lease.Release(context.WithoutCancel(ctx), b); err != nil {
				log.Warn("lease release failed", "error", err.Error())
			}
		}()
	}
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		out.Err = err
		log.Error("read failed", "error", err.Error())
		return out
	}
	out.FragmentsBefore, out.FragmentsAfter = len(m.Fragments), len(m.Fragments)
	due, why := ShouldCompact(m, o.Policy, now)
	if !due {
		out.Skipped = why
		log.Info("compaction not due", "reason", why, "fragments", len(m.Fragments))
	} else {
		res, err := Compact(ctx, b, o.Policy, &Options{DryRun: o.DryRun})
		run := Run{Started: now, DurationS: res.Duration.Seconds(), Version: res.Version, FragmentsBefore: res.FragmentsBefore,
			FragmentsAfter: res.FragmentsAfter, Rows: res.RowsAfter, BytesRewritten: res.BytesRewritten}
		if err != nil {
			run.Error = err.Error()
			out.Err = err
			log.Error("compaction failed", "error", err.Error())
		} else {
			out.Compacted = res.Version != 0
			out.FragmentsBefore, out.FragmentsAfter = res.FragmentsBefore, res.FragmentsAfter
			log.Info("compacted", "reason", why, "dry_run", o.DryRun, "plan", strings.TrimSpace(res.Plan.String()), "version", res.Version,
				"fragments_before", res.FragmentsBefore, "fragments_after", res.FragmentsAfter, "rows", res.RowsAfter,
				"bytes_rewritten", res.BytesRewritten, "duration_s", res.Duration.Seconds(), "replans", res.Replans)
		}
		if !o.DryRun {
			// A failed run commits nothing to the table: its error is
			// recorded beside it.
			if rerr := Record(ctx, b, run, o.History); rerr != nil {
				log.Warn("recording the run failed", "error", rerr.Error())
			}
		}
		if err != nil {
			return out
		}
	}
	if o.NoGC {
		return out
	}
	gp := o.GC
	gp.DryRun = gp.DryRun || o.DryRun
	res, err := GC(ctx, b, gp, now)
	for _, v := range res.Repaired {
		log.Warn("repaired", "version", v, "why", "its data was collected before it landed; it was never acknowledged")
	}
	if err != nil {
		out.Err = err
		log.Error("gc failed", "error", err.Error())
		if !gp.DryRun {
			// Missing data must show where operators look: the status.
			if rerr := Record(ctx, b, Run{Started: now, Error: "gc: " + err.Error()}, o.History); rerr != nil {
				log.Warn("recording the failure failed", "error", rerr.Error())
			}
		}
		return out
	}
	out.VersionsDeleted, out.ObjectsDeleted, out.BytesFreed = len(res.VersionsDeleted), len(res.ObjectsDeleted), res.BytesFreed
	log.Info("gc", "dry_run", gp.DryRun, "boundary", res.Boundary, "versions_kept", res.VersionsKept,
		"versions_deleted", len(res.VersionsDeleted), "objects_deleted", len(res.ObjectsDeleted), "bytes_freed", res.BytesFreed)
	return out
}

// DiscoverTables lists the tables under a bucket URL: every prefix that
// holds a _versions/ folder. It returns their URLs.
func DiscoverTables(ctx context.Context, open func(context.Context, string) (blob.Bucket, error), root string) ([]string, error) {
	b, err := open(ctx, root)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	seen := map[string]bool{}
	var out []string
	for o, err := range blob.List(ctx, b, "", 0) {
		if err != nil {
			return nil, err
		}
		i := strings.Index(o.Key, table.VersionsDir)
		if i < 0 || (i > 0 && o.Key[i-1] != '/') {
			continue
		}
		prefix := strings.TrimSuffix(o.Key[:i], "/")
		if seen[prefix] {
			continue
		}
		seen[prefix] = true
		out = append(out, joinURL(root, prefix))
	}
	return out, nil
}

// joinURL appends a path to a bucket URL, before any query.
func joinURL(root, sub string) string {
	if sub == "" {
		return root
	}
	base, query, _ := strings.Cut(root, "?")
	u := strings.TrimSuffix(base, "/") + "/" + sub
	if query != "" {
		u += "?" + query
	}
	return u
}
