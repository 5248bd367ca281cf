package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/harness/testenv"
)

// The Python client's PyTorch dataset over a strata serve on MinIO: a
// 200,000-row table read by 4 ranks (processes) of 2 DataLoader workers
// each reads every row once per epoch, two epochs in different orders
// from one seed and an epoch again in the same order; a rank killed with
// its workers mid-epoch, started again from the state it saved, reads the
// rest of its rows and none twice (clients/python/tests/torch_e2e.py).
func TestPyTorchDatasetOnMinIO(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import numpy, pandas, torch").Run(); err != nil {
		if testenv.InCI() {
			t.Fatalf("Debian's python3-torch and python3-pandas are required under CI=true (scripts/install-test-deps.sh): %v", err)
		}
		t.Skipf("/usr/bin/python3 cannot import numpy, pandas and torch: %v", err)
	}
	minio := testenv.MinIO(t)
	port := freePort(t)
	u := fmt.Sprintf("http://127.0.0.1:%d", port)
	run(t, "strata", "serve", "--bucket", minio.URL(t), "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--instance", "trainer")
	waitUp(t, u+"/healthz")
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/usr/bin/python3", filepath.Join(root, "clients", "python", "tests", "torch_e2e.py"), u).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("the dataset's check: %v", err)
	}
	if !strings.Contains(string(out), "resumed with") {
		t.Fatal("the check did not reach the resumed rank")
	}
}
