package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/harness/testcert"
	"github.com/stratadb/strata/harness/testenv"
)

// newToken runs strata token new and returns the token and its line.
func newToken(t *testing.T, name string, grants ...string) (token, line string) {
	t.Helper()
	args := []string{"token", "new", "--name", name}
	for _, g := range grants {
		args = append(args, "--grant", g)
	}
	out, err := exec.Command(filepath.Join(bins, "strata"), args...).CombinedOutput()
	m := regexp.MustCompile(`(?m)^token: (\S+)\nline:  (.+)$`).FindStringSubmatch(string(out))
	if err != nil || m == nil {
		t.Fatalf("strata token new: %v\n%s", err, out)
	}
	return m[1], m[2]
}

// strata runs the CLI to its end and returns its exit status and output.
func strata(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bins, "strata"), args...)
	cmd.Env = append(os.Environ(), "STRATA_SERVER=", "STRATA_TOKEN=")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

func waitUpTLS(t *testing.T, u, ca, cert, key string) {
	t.Helper()
	conf, err := client.TLSConfig(ca, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	waitUpWith(t, &http.Client{Transport: &http.Transport{TLSClientConfig: conf}, Timeout: time.Second}, u+"/healthz")
}

// strata serve over TLS on MinIO, with a CA the test made and a tokens
// file: the CLI and the Python client append and scan; plain HTTP to the
// port and a client trusting another CA are refused with words that say
// so; a read token cannot append; with --client-ca, the CLI needs its
// certificate.
func TestTLSAndTokensOnMinIO(t *testing.T) {
	t.Parallel() // it waits on processes most of its time
	bucket := testenv.MinIO(t).URL(t)
	dir := t.TempDir()
	certs, err := testcert.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	fleet, fleetLine := newToken(t, "fleet", "append:runs/*", "read:runs/*")
	reader, readerLine := newToken(t, "reader", "read:*")
	admin, adminLine := newToken(t, "admin", "admin:*")
	loader, loaderLine := newToken(t, "loader", "append:runs/*")
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(fleetLine+"\n"+readerLine+"\n"+adminLine+"\n"+loaderLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	u := fmt.Sprintf("https://127.0.0.1:%d", port)
	srv := run(t, "strata", "serve", "--bucket", bucket, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--instance", "tls",
		"--tls-cert", certs.Cert, "--tls-key", certs.Key, "--tokens", tokens)
	waitUpTLS(t, u, certs.CA, "", "")
	conf, err := client.TLSConfig(certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	fields := `{"fields":[{"name":"id","type":"int64"},{"name":"msg","type":"string","nullable":true}]}`
	for _, name := range []string{"runs/cli", "runs/py"} {
		req, _ := http.NewRequest("PUT", u+"/api/v1/tables/"+strings.ReplaceAll(name, "/", "%2F"), strings.NewReader(fields))
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}}
		resp, err := hc.Do(req)
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("create %s over TLS: %v %v", name, resp, err)
		}
		resp.Body.Close()
	}
	rows := filepath.Join(dir, "rows.jsonl")
	if err := os.WriteFile(rows, []byte(`{"id":1,"msg":"a"}`+"\n"+`{"id":2,"msg":"b"}`+"\n"+`{"id":3,"msg":null}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	remote := []string{"--server", u, "--ca", certs.CA}
	if code, out := strata(t, append([]string{"append", "runs/cli", rows, "--token", fleet}, remote...)...); code != 0 || !strings.Contains(out, "appended 3 rows") {
		t.Fatalf("strata append over TLS: exit %d\n%s", code, out)
	}
	if code, out := strata(t, append([]string{"append", "runs/cli", rows, "--token", fleet}, remote...)...); code != 0 || !strings.Contains(out, "already appended") {
		t.Fatalf("the same append again over TLS: exit %d\n%s", code, out)
	}
	// A token that may only append appends (the CLI reads the schema it
	// converts the rows to, which an append grant allows), and reads
	// nothing.
	more := filepath.Join(dir, "more.jsonl")
	if err := os.WriteFile(more, []byte(`{"id":4,"msg":"d"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := strata(t, append([]string{"append", "runs/cli", more, "--token", loader}, remote...)...); code != 0 || !strings.Contains(out, "appended 1 rows") {
		t.Fatalf("strata append with an append-only token: exit %d\n%s", code, out)
	}
	if code, out := strata(t, append([]string{"scan", "runs/cli", "--token", loader}, remote...)...); code == 0 || !strings.Contains(out, "lacks the grant read:runs/cli") {
		t.Fatalf("a scan with an append-only token: exit %d\n%s", code, out)
	}
	if code, out := strata(t, append([]string{"checkpoint", "runs/cli", "--token", fleet}, remote...)...); code != 0 {
		t.Fatalf("strata checkpoint over TLS: exit %d\n%s", code, out)
	}
	code, out := strata(t, append([]string{"scan", "runs/cli", "--token", reader, "--format", "jsonl"}, remote...)...)
	if code != 0 || strings.Count(out, "\n") != 4 || !strings.Contains(out, `"msg":"b"`) {
		t.Fatalf("strata scan over TLS: exit %d\n%s", code, out)
	}
	if code, out := strata(t, append([]string{"append", "runs/cli", rows, "--token", reader, "--again"}, remote...)...); code == 0 || !strings.Contains(out, `lacks the grant append:runs/cli`) {
		t.Fatalf("the reader's append: exit %d\n%s", code, out)
	}
	if code, out := strata(t, "scan", "runs/cli", "--token", reader, "--server", u, "--ca", certs.OtherCA); code == 0 || !strings.Contains(out, "not signed by a CA this client trusts") {
		t.Fatalf("a scan trusting another CA: exit %d\n%s", code, out)
	}
	if code, out := strata(t, "scan", "runs/cli", "--token", reader, "--server", "http"+strings.TrimPrefix(u, "https")); code == 0 || !strings.Contains(out, "serves HTTPS") {
		t.Fatalf("a plain HTTP scan of the TLS port: exit %d\n%s", code, out)
	}
	// The Python client.
	if err := exec.Command("/usr/bin/python3", "-c", "import ssl").Run(); err != nil {
		t.Fatalf("/usr/bin/python3: %v", err)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	py, err := exec.Command("/usr/bin/python3", filepath.Join(root, "clients", "python", "tests", "tls_e2e.py"), u, fleet, reader, certs.CA, certs.OtherCA).CombinedOutput()
	t.Logf("%s", py)
	if err != nil {
		t.Fatalf("the Python client over TLS: %v", err)
	}
	if strings.Contains(srv.stderr(), fleet) || strings.Contains(srv.stderr(), reader) || strings.Contains(srv.stderr(), admin) {
		t.Fatal("the server's log holds a token")
	}
	if !strings.Contains(srv.stderr(), `"token":"fleet"`) {
		t.Fatalf("the access log does not name the fleet's token:\n%s", lastLines(srv.stderr(), 5))
	}

	// Mutual TLS: a second server asks for the client's certificate.
	mport := freePort(t)
	mu := fmt.Sprintf("https://127.0.0.1:%d", mport)
	msrv := run(t, "strata", "serve", "--bucket", bucket, "--listen", fmt.Sprintf("127.0.0.1:%d", mport), "--instance", "mtls",
		"--tls-cert", certs.Cert, "--tls-key", certs.Key, "--client-ca", certs.CA)
	waitUpTLS(t, mu, certs.CA, certs.ClientCert, certs.ClientKey)
	if code, out := strata(t, "scan", "runs/cli", "--server", mu, "--ca", certs.CA); code == 0 || !strings.Contains(out, "needs the client's certificate: --client-cert") {
		t.Fatalf("a scan without the client certificate: exit %d\n%s", code, out)
	}
	// An operator's SIGHUP does not stop a server without a tokens file.
	msrv.signal(syscall.SIGHUP)
	time.Sleep(200 * time.Millisecond)
	code, out = strata(t, "scan", "runs/cli", "--server", mu, "--ca", certs.CA, "--client-cert", certs.ClientCert, "--client-key", certs.ClientKey, "--format", "jsonl")
	if code != 0 || strings.Count(out, "\n") != 4 {
		t.Fatalf("a scan with the client certificate, after a SIGHUP: exit %d\n%s", code, out)
	}
	if !strings.Contains(msrv.stderr(), "TLS handshake failed") {
		t.Fatalf("the refused handshake is not in the server's log:\n%s", lastLines(msrv.stderr(), 5))
	}
}
