package compactor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/commit"
	"github.com/stratadb/strata/lakehouse"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/walshard"
)

// JobOptions configure the singleton compactor Job (strata-compactor).
type JobOptions struct {
	Tables []string // table URLs
	Policy Policy
	GC     GCPolicy
	NoGC   bool
	// Iceberg keeps each table's Iceberg view (package lakehouse) up to
	// date: every pass exports the versions GC keeps, before collecting.
	Iceberg  bool
	LeaseTTL time.Duration // default 30m
	Holder   string        // who holds the lease (default: "strata-compactor")
	DryRun   bool
	// History is how many run records to keep per table (default 100).
	History int
	// NoFleetMerge skips the fleet merge each pass runs first (see
	// walshard.FleetMerge); Fleet tunes it.
	NoFleetMerge bool
	Fleet        walshard.FleetOptions
	// AdoptAfter: a shard whose owner has written nothing for this long
	// and that holds rows not in the table is adopted (walshard.Adopt);
	// default 15m, negative never. Interval passes look for such shards
	// every AdoptAfter/3.
	AdoptAfter time.Duration
	Log        *slog.Logger
	Open       func(ctx context.Context, url string) (blob.Bucket, error) // default blob.Open
	Now        func() time.Time                                           // default time.Now
	// OnPass, when set, is told of every pass (what it did, how long it
	// took) and OnFleetMerge of every fleet merge that committed or failed
	// (in interval mode they run beside the passes): metrics hang here.
	OnPass       func(sum Summary, d time.Duration)
	OnFleetMerge func(table string, res walshard.FleetResult, d time.Duration, err error)
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
	// FleetMerged: generations the pass's fleet merge added, from
	// FleetShards shards. Adopted: shards it adopted.
	FleetMerged int
	FleetShards int
	Adopted     []string
	// Iceberg is the newest Iceberg metadata's location, when the pass
	// exported (JobOptions.Iceberg).
	Iceberg string
	// Idle: nothing had changed since the last pass (interval mode), so it
	// looked (two requests) and did nothing.
	Idle bool
	Err  error
}

// Summary is one pass over every table.
type Summary struct {
	Tables, Compacted, Skipped, Failed int
	FragmentsBefore, FragmentsAfter    int
	VersionsDeleted, ObjectsDeleted    int
	FleetMerged, Adopted, Idle         int
	Outcomes                           []TableOutcome
}

// RunOnce makes one pass: for each table, take the lease, compact if due,
// record the run, collect garbage, and release the lease. A table whose
// lease another Job holds is skipped, not failed. The error joins the
// tables' failures.
func RunOnce(ctx context.Context, opts *JobOptions) (Summary, error) {
	if err := opts.Validate(); err != nil {
		return Summary{}, err
	}
	return timedPass(ctx, *opts.EnsureDefaults(), nil)
}

// timedPass runs a pass and tells OnPass.
func timedPass(ctx context.Context, o JobOptions, memos map[string]*memo) (Summary, error) {
	start := time.Now()
	sum, err := runPass(ctx, o, memos)
	if o.OnPass != nil {
		o.OnPass(sum, time.Since(start))
	}
	return sum, err
}

// memo is what interval passes remember of a table between passes, so
// that a pass over a table where nothing happened costs two requests.
type memo struct {
	b       blob.Bucket
	version uint64    // the newest version the last full pass left
	gcAt    time.Time // when the last collection ran
	sweptAt time.Time // when abandoned shards were last looked for
}

func runPass(ctx context.Context, o JobOptions, memos map[string]*memo) (Summary, error) {
	var sum Summary
	var errs []error
	for _, u := range o.Tables {
		var out TableOutcome
		if m := memos[u]; m != nil && idle(ctx, o, m) {
			out = TableOutcome{Table: u, Idle: true, Skipped: "nothing changed since the last pass"}
		} else {
			out = runTable(ctx, o, u, memos)
		}
		sum.Outcomes = append(sum.Outcomes, out)
		sum.Tables++
		sum.FragmentsBefore += out.FragmentsBefore
		sum.FragmentsAfter += out.FragmentsAfter
		sum.VersionsDeleted += out.VersionsDeleted
		sum.ObjectsDeleted += out.ObjectsDeleted
		sum.FleetMerged += out.FleetMerged
		sum.Adopted += len(out.Adopted)
		if out.Idle {
			sum.Idle++
		}
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
		"versions_deleted", sum.VersionsDeleted, "objects_deleted", sum.ObjectsDeleted,
		"generations_fleet_merged", sum.FleetMerged, "shards_adopted", sum.Adopted, "idle", sum.Idle)
	return sum, errors.Join(errs...)
}

// Loop runs a pass every interval until ctx ends; failures are logged and
// the next pass goes on. Fleet merges run beside the passes, every
// interval too, so that a long compaction does not hold them up. It keeps
// each table's bucket open and remembers what it saw, so that an interval
// over a table where nothing happened (no new version, no generation
// announced, no collection or adoption sweep due) costs two requests: the
// merge's LIST of announcements and the pass's LIST of versions.
func Loop(ctx context.Context, opts *JobOptions, interval time.Duration) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	o := *opts.EnsureDefaults()
	memos := map[string]*memo{}
	defer func() {
		for _, m := range memos {
			m.b.Close()
		}
	}()
	// Fleet merges run on their own, every interval, so that a fleet's
	// flushed generations wait one interval at most for their merge
	// however long a compaction or a collection takes: an append never
	// conflicts with a compaction, and a fleet merge needs no lease.
	var merger sync.WaitGroup
	defer merger.Wait()
	if !o.NoFleetMerge && !o.DryRun {
		merger.Add(1)
		mo := o
		go func() {
			defer merger.Done()
			mergeLoop(ctx, mo, interval)
		}()
		o.NoFleetMerge = true
	}
	// Passes start every interval (a pass that runs longer is followed at
	// once by the next).
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := timedPass(ctx, o, memos); err != nil {
			o.Log.Error("pass failed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// mergeLoop fleet-merges every table every interval until ctx ends, on
// buckets of its own. A table with nothing announced costs one LIST.
func mergeLoop(ctx context.Context, o JobOptions, interval time.Duration) {
	buckets := map[string]blob.Bucket{}
	defer func() {
		for _, b := range buckets {
			b.Close()
		}
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, u := range o.Tables {
			if ctx.Err() != nil {
				return
			}
			b := buckets[u]
			if b == nil {
				var err error
				if b, err = o.Open(ctx, u); err != nil {
					o.Log.Error("open failed", "table", u, "error", err.Error())
					continue
				}
				buckets[u] = b
			}
			fleetMerge(ctx, o, u, b, o.Log.With("table", u))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// fleetMerge runs one fleet merge and logs what it did.
func fleetMerge(ctx context.Context, o JobOptions, u string, b blob.Bucket, log *slog.Logger) (walshard.FleetResult, error) {
	started := time.Now()
	res, err := walshard.FleetMerge(ctx, b, &o.Fleet)
	if o.OnFleetMerge != nil && (err != nil || res.Version != 0) && ctx.Err() == nil {
		o.OnFleetMerge(u, res, time.Since(started), err)
	}
	if err != nil {
		if ctx.Err() == nil {
			log.Error("fleet merge failed", "error", err.Error(), "failed_shards", res.Failed)
		}
		return res, err
	}
	if res.Version != 0 {
		log.Info("fleet merged", "shards", res.Shards, "generations", res.Generations, "rows", res.Rows,
			"version", res.Version, "duration_s", time.Since(started).Seconds())
	}
	return res, nil
}

// gcEvery: how often interval passes collect garbage (a collection lists
// every object of the table, and what it may delete only ages slowly).
func (o JobOptions) gcEvery() time.Duration {
	return max(o.GC.withDefaults().RetainFor, MinRetain) / 4
}

// idle tells whether nothing happened to the table since the last pass:
// one LIST for the newest version, one for announced generations.
func idle(ctx context.Context, o JobOptions, m *memo) bool {
	now := o.Now()
	if (!o.NoGC && now.Sub(m.gcAt) >= o.gcEvery()) || (o.AdoptAfter > 0 && now.Sub(m.sweptAt) >= o.AdoptAfter/3) {
		return false
	}
	v, err := table.LatestVersion(ctx, m.b)
	if err != nil || v != m.version {
		return false
	}
	if !o.NoFleetMerge {
		page, err := m.b.ListPage(ctx, table.FleetPendingDir, "", 1)
		if err != nil || len(page.Objects) > 0 {
			return false
		}
	}
	return true
}

func runTable(ctx context.Context, o JobOptions, u string, memos map[string]*memo) (out TableOutcome) {
	out.Table = u
	log := o.Log.With("table", u)
	m := memos[u]
	var b blob.Bucket
	if m != nil {
		b = m.b
	} else {
		var err error
		if b, err = o.Open(ctx, u); err != nil {
			out.Err = err
			log.Error("open failed", "error", err.Error())
			return out
		}
		if memos != nil {
			m = &memo{b: b}
			memos[u] = m
		} else {
			defer b.Close()
		}
	}
	now := o.Now()
	if m != nil {
		defer func() {
			if out.Err == nil {
				if v, err := table.LatestVersion(context.WithoutCancel(ctx), b); err == nil {
					m.version = v
				}
			}
		}()
	}
	var lease *HeldLease
	var err error
	if !o.DryRun {
		lease, err = TakeLease(ctx, b, o.Holder, o.LeaseTTL, now)
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
			if err := lease.Release(context.WithoutCancel(ctx)); err != nil {
				log.Warn("lease release failed", "error", err.Error())
			}
		}()
	}
	if !o.NoFleetMerge && !o.DryRun {
		res, err := fleetMerge(ctx, o, u, b, log)
		out.FleetMerged, out.FleetShards = res.Generations, res.Shards
		if err != nil {
			out.Err = err
			return out
		}
	}
	// The store's clock, read once a pass and only for the steps that
	// judge ages by the store's modification times (StoreClock).
	var storeNow time.Time
	storeClock := func() (time.Time, error) {
		if storeNow.IsZero() {
			t, err := StoreClock(ctx, b, now)
			if err != nil {
				return now, fmt.Errorf("reading the store's clock: %w", err)
			}
			storeNow = t
		}
		return storeNow, nil
	}
	if o.AdoptAfter > 0 && !o.DryRun && (m == nil || now.Sub(m.sweptAt) >= o.AdoptAfter/3) {
		// A shard that cannot be adopted (its WAL damaged) holds up
		// neither the others nor the rest of the pass; its error is the
		// pass's unless a later step fails.
		err := adoptAbandoned(ctx, o, b, now, storeClock, &out, log)
		if err != nil {
			defer func() {
				if out.Err == nil {
					out.Err = err
				}
			}()
		}
		if m != nil {
			m.sweptAt = now
		}
	}
	latest, err := table.ReadLatest(ctx, b)
	if err != nil {
		out.Err = err
		log.Error("read failed", "error", err.Error())
		return out
	}
	out.FragmentsBefore, out.FragmentsAfter = len(latest.Fragments), len(latest.Fragments)
	due, why := ShouldCompact(latest, o.Policy, now)
	if !due {
		out.Skipped = why
		log.Info("compaction not due", "reason", why, "fragments", len(latest.Fragments))
	} else {
		res, err := Compact(ctx, b, &o.Policy, &Options{DryRun: o.DryRun, Leased: true})
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
				"bytes_rewritten", res.BytesRewritten, "bins_copied", res.BinsCopied, "duration_s", res.Duration.Seconds(), "replans", res.Replans)
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
	if o.Iceberg && !o.DryRun {
		if err := exportIceberg(ctx, o, u, b, now, &out, log); err != nil {
			out.Err = err
			return out
		}
	}
	if o.NoGC || (m != nil && now.Sub(m.gcAt) < o.gcEvery()) {
		return out
	}
	gp := o.GC
	gp.DryRun = gp.DryRun || o.DryRun
	gcNow := now
	if !gp.DryRun {
		if gcNow, err = storeClock(); err != nil {
			out.Err = err
			log.Error("gc failed", "error", err.Error())
			return out
		}
	}
	res, err := GC(ctx, b, &gp, gcNow)
	if m != nil {
		m.gcAt = now
	}
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

// exportIceberg brings the table's Iceberg view up to date, describing
// the versions this pass's collection keeps (the same policy), so that the
// collection right after it may take the versions that aged out.
func exportIceberg(ctx context.Context, o JobOptions, u string, b blob.Bucket, now time.Time, out *TableOutcome, log *slog.Logger) error {
	loc, err := lakehouse.LocationOf(u)
	if err != nil {
		return err
	}
	gp := o.GC.withDefaults()
	res, err := lakehouse.Export(ctx, b, &lakehouse.Options{Location: loc, KeepVersions: gp.KeepVersions, RetainFor: gp.RetainFor}, now)
	if err != nil {
		log.Error("iceberg export failed", "error", err.Error())
		return fmt.Errorf("iceberg export: %w", err)
	}
	out.Iceberg = res.MetadataLocation
	log.Info("iceberg", "metadata", res.MetadataLocation, "written", res.Written, "current", res.Current,
		"snapshots", len(res.Snapshots), "added", len(res.Added), "dropped", len(res.Dropped))
	return nil
}

// adoptAfter adopts the table's abandoned shards, logging each and
// recording them in the history.
func adoptAbandoned(ctx context.Context, o JobOptions, b blob.Bucket, now time.Time, storeClock func() (time.Time, error), out *TableOutcome, log *slog.Logger) error {
	// Quiet since when, by the store's clock: a Job whose clock runs ahead
	// must not take a live shard for an abandoned one.
	quietNow, err := storeClock()
	if err != nil {
		log.Error("looking for abandoned shards failed", "error", err.Error())
		return err
	}
	found, err := walshard.FindAbandoned(ctx, b, o.AdoptAfter, quietNow)
	if err != nil {
		log.Error("looking for abandoned shards failed", "error", err.Error())
		return err
	}
	var errs []error
	for _, a := range found {
		if ctx.Err() != nil {
			break
		}
		res, err := walshard.Adopt(ctx, b, a.Shard, walshard.Options{Commit: commit.Options{Writer: o.Holder + " (adopting " + a.Shard + ")"}})
		if err != nil {
			log.Error("adoption failed", "shard", a.Shard, "error", err.Error())
			errs = append(errs, fmt.Errorf("adopting shard %q: %w", a.Shard, err))
			continue
		}
		out.Adopted = append(out.Adopted, a.Shard)
		log.Warn("adopted an abandoned shard", "shard", a.Shard, "quiet_since", a.LastWrite.UTC().Format(time.RFC3339),
			"epoch", res.Epoch, "rows_replayed", res.Rows, "generations_merged", res.Generations, "version", res.Version, "retired", res.Retired)
	}
	err = errors.Join(errs...)
	if len(out.Adopted) > 0 || err != nil {
		// A failure shows where operators look: the status's last_error.
		// Records sort by start time, and the pass's compaction records
		// one at now after this: this one goes just before it, so that
		// the compaction's is the newest and carries both forward.
		run := Run{Started: now.Add(-time.Nanosecond), Adopted: out.Adopted}
		if err != nil {
			run.Error = "adopt: " + err.Error()
		}
		if rerr := Record(ctx, b, run, o.History); rerr != nil {
			log.Warn("recording the adoptions failed", "error", rerr.Error())
		}
	}
	return err
}
