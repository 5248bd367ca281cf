package command

import (
	"strings"
	"testing"
)

// A zero never stands for a default: gc's durations that the collector
// would read 0 of as its default (7 days, 1 h) or raise to its floor are
// usage errors below the floor, naming it.
func TestGCRefusesAZeroThatWouldMeanTheDefault(t *testing.T) {
	u := "file://" + t.TempDir() + "/events"
	for _, args := range [][]string{{"--retain", "0"}, {"--safety-age", "0"}, {"--consumer-retention", "0s"}, {"--retain", "1m"}} {
		code, _, errOut := run(t, nil, append([]string{"gc", u, "--dry-run"}, args...)...)
		if code != 2 || !strings.Contains(errOut, args[0]+" ") || !strings.Contains(errOut, "want at least 5m0s") {
			t.Errorf("gc %s: exit %d %s", strings.Join(args, " "), code, errOut)
		}
	}
}
