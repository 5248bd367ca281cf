package command

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/engine"
)

// A verb's error exits by its code, as the server answers it: one status
// per kind of outcome (the README's table); a usage error 2.
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
		want, ok := map[string]int{
			"outcome_unknown": 3,
			"bad_request":     2, "bad_table_name": 2,
			"bad_input": 4, "unsupported_schema": 4, "too_large": 4, "idempotency_key_reused": 4,
			"not_found": 5, "version_collected": 5,
			"exists": 6, "bad_placement": 6,
		}[c.Code]
		if !ok {
			want = 1
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
