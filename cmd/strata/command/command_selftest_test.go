package command

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
	"github.com/stratadb/strata/harness/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func run(t *testing.T, env *Env, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if env == nil {
		env = &Env{Open: blob.Open}
	}
	env.Out, env.Err = &out, &errOut
	code = Run(args, env)
	return code, out.String(), errOut.String()
}

func TestSelftestPassesOnRealStores(t *testing.T) {
	urls := map[string]string{"file": "file://" + t.TempDir(), "mem": "mem://"}
	if !testing.Short() {
		urls["minio"] = testenv.MinIO(t).URL(t)
	}
	for name, u := range urls {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := run(t, nil, "selftest", u)
			if code != 0 || !strings.Contains(out, "result:    ok") || !strings.Contains(out, "1 won, 15 refused") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
		})
	}
}

func TestSelftestFailsOnStoreIgnoringConditionalCreates(t *testing.T) {
	env := &Env{Open: func(ctx context.Context, u string) (blob.Bucket, error) {
		b, err := blob.Open(ctx, u)
		if err != nil {
			return nil, err
		}
		return fault.Wrap(b, fault.Always(fault.Fault{Action: fault.IgnoreCondition})), nil
	}}
	code, out, errOut := run(t, env, "selftest", "mem://")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "UNSAFE") || !strings.Contains(errOut, "does not honour conditional creates") {
		t.Fatalf("the message does not say why:\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
}

func TestSelftestUsageErrors(t *testing.T) {
	if code, _, _ := run(t, nil, "selftest"); code != 2 {
		t.Fatalf("selftest without a URL: exit %d, want 2", code)
	}
	if code, _, _ := run(t, nil, "selftest", "--no-such-flag", "mem://"); code != 2 {
		t.Fatalf("unknown flag: exit %d, want 2", code)
	}
	if code, _, errOut := run(t, nil, "selftest", "ftp://x"); code != 2 || !strings.Contains(errOut, "unknown scheme") {
		t.Fatalf("bad URL: exit %d, %s", code, errOut)
	}
}
