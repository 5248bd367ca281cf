package command

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/format"
)

// TableStats is what `strata stats` reports.
type TableStats struct {
	Version   uint64         `json:"version"`
	Rows      int64          `json:"rows"`
	Fragments int            `json:"fragments"`
	Bytes     int64          `json:"bytes"`
	Versions  int            `json:"versions"`
	Indexes   []format.Index `json:"indexes,omitempty"`
	// ClusterBy names the cluster key's columns; Sorted counts the
	// fragments sorted by it (compaction sorts the others).
	ClusterBy  []string            `json:"cluster_by,omitempty"`
	Sorted     *int                `json:"sorted_fragments,omitempty"`
	Shards     []engine.ShardStats `json:"shards,omitempty"`
	Compaction engine.Status       `json:"compaction"`
	Consumers  []ConsumerLag       `json:"consumers,omitempty"`
	Requests   blob.Stats          `json:"requests"` // what reading these stats cost
}

// ConsumerLag is a named consumer's position and how many versions it is
// behind the latest.
type ConsumerLag struct {
	table.Consumer
	Lag uint64 `json:"lag_versions"`
}

func readStats(c *cobra.Command, env *Env, url string) (_ TableStats, err error) {
	ctx := c.Context()
	b, err := env.Open(ctx, url)
	if err != nil {
		return TableStats{}, err
	}
	defer b.Close()
	m, err := table.ReadLatest(ctx, b)
	if err != nil {
		return TableStats{}, err
	}
	st := TableStats{Version: m.Version, Rows: m.Rows(), Fragments: len(m.Fragments), Bytes: m.Bytes(), Indexes: m.Indexes}
	st.ClusterBy, _, _ = evolve.ClusterColumns(m.Schema(), m.ClusterBy)
	if len(st.ClusterBy) > 0 {
		sorted := 0
		for _, f := range m.Fragments {
			if slices.Equal(f.SortedBy, m.ClusterBy) {
				sorted++
			}
		}
		st.Sorted = &sorted
	}
	vs, err := table.Versions(ctx, b, 0, false)
	if err != nil {
		return st, err
	}
	st.Versions = len(vs)
	db, err := handle(b)
	if err != nil {
		return st, err
	}
	defer closeDB(db, &err)
	if st.Shards, err = db.ShardStats(ctx, m); err != nil {
		return st, err
	}
	if st.Compaction, err = db.History(ctx, 5); err != nil {
		return st, err
	}
	consumers, err := table.ConsumersAndGroups(ctx, b) // a group as "group NAME" at its slowest position
	if err != nil {
		return st, err
	}
	for _, c := range consumers {
		st.Consumers = append(st.Consumers, ConsumerLag{c, m.Version - min(c.Version, m.Version)})
	}
	st.Requests, _ = blob.StatsOf(b)
	return st, nil
}

func newStats(env *Env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "stats URL",
		Short: "Rows, fragments, bytes, versions, shards and their lag, compaction history",
		Long: `stats reports the latest version's rows, fragments and bytes, the number of
versions, each shard the table has merged from (epoch, WAL lag, generations
awaiting merge), the compactor's history, and each named consumer's
position and lag (strata follow --consumer).`,
		Example: `  strata stats file://./strata-demo/rollouts
  strata stats 's3://lake/rollouts?endpoint=http://127.0.0.1:9000' --json`,
		Args: ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			st, err := readStats(c, env, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(env.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			tw := tabwriter.NewWriter(env.Out, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "version\t%d\nrows\t%d\nfragments\t%d\nbytes\t%d\nversions\t%d\n", st.Version, st.Rows, st.Fragments, st.Bytes, st.Versions)
			if len(st.ClusterBy) > 0 {
				fmt.Fprintf(tw, "cluster by\t%s (%d of %d fragments sorted)\n", strings.Join(st.ClusterBy, ", "), *st.Sorted, st.Fragments)
			}
			for _, ix := range st.Indexes {
				fmt.Fprintf(tw, "index\t%s on %s, %d rows, covers fragments below %d\n", ix.ID, ix.Column, ix.Rows, ix.CoveredBelow)
			}
			for _, s := range st.Shards {
				fmt.Fprintf(tw, "shard %s\tepoch %d, WAL written %d, flushed %d (lag %d), watermark %d, %d generations (%d rows, %d bytes) awaiting merge\n",
					s.Shard, s.Epoch, s.WALLastWritten, s.WALFlushed, s.WALLag, s.Watermark, s.PendingGenerations, s.PendingRows, s.PendingBytes)
			}
			cs := st.Compaction
			last := "never"
			if !cs.LastCompaction.IsZero() {
				last = cs.LastCompaction.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "compactions\t%d, last %s\n", cs.TotalCompactions, last)
			writeKinds(tw, cs)
			for _, c := range st.Consumers {
				fmt.Fprintf(tw, "consumer %s	through v%d (lag %d versions), updated %s\n", c.Name, c.Version, c.Lag, c.Updated.UTC().Format(time.RFC3339))
			}
			for _, sk := range cs.Skipped {
				fmt.Fprintf(env.Err, "strata: warning: skipped a compactor history record that does not decode: %s\n", sk)
			}
			for _, s := range st.Shards {
				for _, q := range s.Quarantined {
					fmt.Fprintf(tw, "shard %s	WAL entry %d quarantined (%s) %s\n", s.Shard, q.Position, q.Key, q.Reason)
				}
			}
			for _, r := range cs.History {
				fmt.Fprintf(tw, "  run %s\t%s\n", r.Started.UTC().Format(time.RFC3339), runLine(r))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

// writeKinds writes a line for each kind of run the history holds: its
// newest run, how long it took, and its error unless a run of that kind
// succeeded since.
func writeKinds(tw io.Writer, cs engine.Status) {
	if len(cs.Kinds) == 0 && cs.LastError != "" {
		// A history written before runs had kinds.
		fmt.Fprintf(tw, "last error\t%s (%s)\n", cs.LastError, cs.LastErrorAt.UTC().Format(time.RFC3339))
	}
	for _, k := range engine.RunKinds {
		ks, ok := cs.Kinds[k]
		if !ok {
			continue
		}
		outcome := "ok"
		if ks.LastError != "" {
			outcome = "failed: " + ks.LastError
		}
		fmt.Fprintf(tw, "last %s\t%s, %.2fs, %s\n", k, ks.LastRun.UTC().Format(time.RFC3339), ks.DurationS, outcome)
	}
}

// runLine is what a recorded run did, by its kind.
func runLine(r engine.Run) string {
	var what string
	switch kind := engine.KindOf(r); kind {
	case engine.RunAdoption:
		what = "adoption: adopted abandoned shards " + strings.Join(r.Adopted, ", ")
		if len(r.Adopted) == 0 {
			what = "adoption: adopted none"
		}
	case engine.RunGC:
		what = fmt.Sprintf("gc: %d objects deleted", r.ObjectsDeleted)
	case engine.RunMerge:
		what = fmt.Sprintf("merge: v%d, %d generations", r.Version, r.Generations)
	case engine.RunExport:
		what = fmt.Sprintf("export: v%d", r.Version)
	default:
		what = fmt.Sprintf("%s: v%d, fragments %d -> %d, %d rows", kind, r.Version, r.FragmentsBefore, r.FragmentsAfter, r.Rows)
	}
	what += fmt.Sprintf(", %.2fs", r.DurationS)
	if r.Error != "" {
		what += ", failed: " + r.Error
	}
	return what
}
