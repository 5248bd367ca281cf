package jobcmd

import (
	"testing"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/job"
)

// The Job labels a table's series with its path under the bucket, as the
// server does, never with the URL it was given (whose query holds the
// store's endpoint): the two processes' series join on it.
func TestTheJobLabelsATableByItsPathUnderTheBucket(t *testing.T) {
	m := newJobMetrics()
	var o job.Options
	m.wire(&o)
	u := "s3://lake/runs/eval?endpoint=http://127.0.0.1:9000"
	o.OnPass(job.Summary{Outcomes: []job.TableOutcome{{Table: u}}}, 0)
	o.Listener.MergeEnd(engine.MergeInfo{Table: u, Fleet: true})
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() != "table" {
					continue
				}
				seen++
				if l.GetValue() != "runs/eval" {
					t.Errorf("%s{table=%q}, want table=\"runs/eval\"", f.GetName(), l.GetValue())
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no series labelled by table")
	}
}
