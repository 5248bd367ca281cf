package testenv

import "testing"

// Any truthy CI counts: a CI system that sets CI=1 must not see a missing
// server skipped.
func TestInCI(t *testing.T) {
	for v, want := range map[string]bool{"true": true, "1": true, "yes": true, "TRUE": true, "": false, "0": false, "false": false, "no": false} {
		t.Setenv("CI", v)
		if got := InCI(); got != want {
			t.Errorf("CI=%q: InCI() = %v, want %v", v, got, want)
		}
	}
}
