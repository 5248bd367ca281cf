package command

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
)

// A verb's error exits by its code, as the server answers it: 3 for every
// error whose outcome is unknown, 1 for the others; a usage error 2.
func TestEveryErrorExitsByItsCode(t *testing.T) {
	for _, c := range engine.ErrorCodes {
		err := c.Err
		if err == nil {
			continue // a typed error: engine's own test covers it
		}
		var out, errOut bytes.Buffer
		got := RunRoot([]string{"fail"}, &Env{Out: &out, Err: &errOut, Open: blob.Open}, func(*Env) *cobra.Command {
			root := &cobra.Command{Use: "strata", SilenceUsage: true, SilenceErrors: true}
			root.AddCommand(&cobra.Command{Use: "fail", RunE: func(*cobra.Command, []string) error { return fmt.Errorf("verb: %w", err) }})
			return root
		})
		want := 1
		if c.Code == "outcome_unknown" {
			want = 3
		}
		if got != want {
			t.Errorf("%v: exit %d, want %d", err, got, want)
		}
	}
	var out, errOut bytes.Buffer
	if got := RunRoot([]string{"no-such-verb"}, &Env{Out: &out, Err: &errOut, Open: blob.Open}, newRoot); got != 2 {
		t.Errorf("an unknown verb exits %d, want 2", got)
	}
}
