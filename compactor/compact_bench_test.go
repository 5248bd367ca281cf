package compactor_test

import (
	"testing"

	"github.com/stratadb/strata/compactor"
)

// BenchmarkCompactWorkload compacts the shared workload's table (200
// fragments of 200 rollouts rows) into one, in a folder:
//
//	go test -run '^$' -bench CompactWorkload -cpuprofile cpu.out ./compactor
func BenchmarkCompactWorkload(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		bk := rolloutsTable(b, "file://"+b.TempDir(), 0, 200, 200)
		b.StartTimer()
		res, err := compactor.Compact(ctx, bk, &compactor.Policy{MinFragments: 2}, nil)
		if err != nil || res.FragmentsAfter != 1 {
			b.Fatalf("%+v %v", res, err)
		}
	}
}
