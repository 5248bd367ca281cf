package e2e

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/harness/testcert"
	"github.com/stratadb/strata/harness/testenv"
)

// What the tests read of a Kubernetes manifest: the pod template of a
// Deployment, its containers, their settings and probes.
type (
	manifest struct {
		Kind     string
		Metadata struct{ Name string }
		Spec     struct {
			Template struct {
				Metadata struct{ Annotations map[string]string }
				Spec     struct {
					AutomountServiceAccountToken *bool `yaml:"automountServiceAccountToken"`
					Containers                   []container
					Volumes                      []struct {
						Name   string
						Secret *struct {
							SecretName string `yaml:"secretName"`
						}
					}
				}
			}
		}
	}
	container struct {
		Name           string
		Command, Args  []string
		Env            []envVar
		Ports          []containerPort
		LivenessProbe  *probe `yaml:"livenessProbe"`
		ReadinessProbe *probe `yaml:"readinessProbe"`
		VolumeMounts   []struct {
			Name      string
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	envVar struct {
		Name, Value string
		ValueFrom   *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
			SecretKeyRef *struct{ Name, Key string } `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	}
	containerPort struct {
		Name          string
		ContainerPort int `yaml:"containerPort"`
	}
	probe struct {
		HTTPGet *struct {
			Path   string
			Port   string
			Scheme string
		} `yaml:"httpGet"`
	}
)

// readmeManifests returns the manifests the README's kubectl apply line
// names: the deployment a reader of the README makes.
func readmeManifests(t *testing.T, root string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^kubectl apply .*$`).Find(data)
	if line == nil {
		t.Fatal("README.md has no line beginning with kubectl apply")
	}
	var files []string
	for _, m := range regexp.MustCompile(`-f (deploy/\S+\.yaml)`).FindAllSubmatch(line, -1) {
		files = append(files, string(m[1]))
	}
	if len(files) == 0 {
		t.Fatalf("the README's %q names no manifest", line)
	}
	return files
}

// deployments reads the Deployments of the manifests.
func deployments(t *testing.T, root string, files []string) []manifest {
	t.Helper()
	var out []manifest
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var m manifest
			if err := dec.Decode(&m); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if m.Kind == "CronJob" || m.Kind == "Job" {
				t.Fatalf("%s: the README's deployment runs a %s, whose passes expose no metrics for Prometheus to scrape", f, m.Kind)
			}
			if m.Kind == "Deployment" {
				out = append(out, m)
			}
		}
	}
	return out
}

// pod is one container of a manifest started as a process here: the
// manifest's command, arguments and environment, with the store pointed
// at the test MinIO and each container port at a free port of this host.
type pod struct {
	name  string
	proc  *proc
	ports map[string]int // by port name and by container port number
	m     manifest
	c     container
}

func (p *pod) port(t *testing.T, ref string) int {
	t.Helper()
	n, ok := p.ports[ref]
	if !ok {
		t.Fatalf("%s: no container port %q", p.name, ref)
	}
	return n
}

// A secret volume is a folder here (secrets: by the Secret's name), put
// where the container's arguments name its mount path.
func startPod(t *testing.T, m manifest, c container, store, token string, secrets map[string]string) *pod {
	t.Helper()
	p := &pod{name: m.Metadata.Name + "/" + c.Name, ports: map[string]int{}, m: m, c: c}
	lake := regexp.MustCompile(`s3://lake(/|\?)`)
	env := map[string]string{}
	var environ []string
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			v = m.Metadata.Name + "-7d9f-x2" // a pod's name
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			v = map[string]string{
				"strata-token/token":          token,
				"strata-s3/access-key-id":     testenv.MinIOUser,
				"strata-s3/secret-access-key": testenv.MinIOPassword,
			}[e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key]
			if v == "" {
				t.Fatalf("%s: env %s names a secret the test does not know", p.name, e.Name)
			}
		case e.ValueFrom != nil:
			t.Fatalf("%s: env %s comes from somewhere the test does not know", p.name, e.Name)
		}
		v = lake.ReplaceAllString(v, store+"$1")
		v = strings.ReplaceAll(v, "http://minio.storage:9000", testenv.MinIO(t).Endpoint)
		env[e.Name] = v
		environ = append(environ, e.Name+"="+v)
	}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = regexp.MustCompile(`\$\(([A-Z_]+)\)`).ReplaceAllStringFunc(a, func(s string) string { return env[s[2:len(s)-1]] })
	}
	for _, vm := range c.VolumeMounts {
		for _, v := range m.Spec.Template.Spec.Volumes {
			if v.Name != vm.Name || v.Secret == nil {
				continue
			}
			dir, ok := secrets[v.Secret.SecretName]
			if !ok {
				t.Fatalf("%s: volume %s mounts a secret the test does not know: %s", p.name, v.Name, v.Secret.SecretName)
			}
			for i, a := range args {
				args[i] = strings.ReplaceAll(a, strings.TrimSuffix(vm.MountPath, "/")+"/", dir+"/")
			}
		}
	}
	for _, cp := range c.Ports {
		free := freePort(t)
		p.ports[cp.Name], p.ports[strconv.Itoa(cp.ContainerPort)] = free, free
		for i, a := range args {
			if suffix := ":" + strconv.Itoa(cp.ContainerPort); strings.HasSuffix(a, suffix) {
				args[i] = strings.TrimSuffix(a, suffix) + ":" + strconv.Itoa(free)
			}
		}
	}
	bin := "strata" // the image's entry point
	if len(c.Command) > 0 {
		bin = path.Base(c.Command[0])
		args = append(c.Command[1:len(c.Command):len(c.Command)], args...)
	}
	p.proc = runEnv(t, environ, bin, args...)
	t.Cleanup(func() { p.proc.signal(syscall.SIGTERM) })
	return p
}

// get answers a GET without credentials, as a kubelet probe or a
// Prometheus scrape by annotation sends it (https with the test's CA).
func get(hc *http.Client, u string) (int, string) {
	resp, err := hc.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// The deployment the README applies sees itself: every pod its manifests
// start — run here as processes with the manifests' own commands,
// arguments and environment, the server's bearer token set — answers its
// probes and the Prometheus scrape its annotations describe, with no
// token, and between them they expose every metric the Grafana dashboard
// and the alert rules query, once the deployment has taken appends.
func TestTheREADMEsDeploymentExposesEveryMetricItsDashboardQueries(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	queried := queriedMetrics(t, root)
	minio := testenv.MinIO(t)
	store := strings.SplitN(minio.URL(t), "?", 2)[0]
	const token = "deploy-test-token"
	// The strata-tls Secret, as cert-manager writes it.
	tlsDir := t.TempDir()
	certs, err := testcert.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for from, to := range map[string]string{certs.Cert: "tls.crt", certs.Key: "tls.key"} {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tlsDir, to), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conf, err := client.TLSConfig(certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}, Timeout: 10 * time.Second}
	scheme := func(s string) string { return strings.ToLower(cmp.Or(s, "http")) }

	var pods []*pod
	var api string
	for _, m := range deployments(t, root, readmeManifests(t, root)) {
		if m.Spec.Template.Spec.AutomountServiceAccountToken == nil || *m.Spec.Template.Spec.AutomountServiceAccountToken {
			t.Errorf("%s mounts the service-account token; nothing in it talks to the Kubernetes API", m.Metadata.Name)
		}
		for _, c := range m.Spec.Template.Spec.Containers {
			p := startPod(t, m, c, store, token, map[string]string{"strata-tls": tlsDir})
			pods = append(pods, p)
			if len(c.Args) > 0 && c.Args[0] == "serve" {
				if !slices.Contains(c.Args, "--tls-cert") {
					t.Fatalf("%s: the server listens beyond loopback without TLS", p.name)
				}
				api = fmt.Sprintf("https://127.0.0.1:%d/api/v1/tables", p.port(t, "http"))
			}
		}
	}
	if api == "" {
		t.Fatal("the README's deployment runs no strata serve")
	}
	for _, p := range pods {
		for _, pr := range []*probe{p.c.ReadinessProbe, p.c.LivenessProbe} {
			if pr == nil || pr.HTTPGet == nil {
				t.Fatalf("%s: a long-running container without an HTTP readiness and liveness probe", p.name)
			}
			u := fmt.Sprintf("%s://127.0.0.1:%d%s", scheme(pr.HTTPGet.Scheme), p.port(t, pr.HTTPGet.Port), pr.HTTPGet.Path)
			waitUpWith(t, hc, u)
			if code, body := get(hc, u); code != http.StatusOK {
				t.Fatalf("%s: probe %s answers %d %s\n%s", p.name, u, code, body, p.proc.stderr())
			}
		}
	}

	call := func(method, u, ctype, body string) {
		t.Helper()
		req, err := http.NewRequest(method, u, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, u, resp.StatusCode, data)
		}
	}
	if code, _ := get(hc, api); code != http.StatusUnauthorized {
		t.Fatalf("the server answers %d to a client without its token, not 401", code)
	}
	call("PUT", api+"/events", "application/json", `{"fields":[{"name":"id","type":"int64"}]}`)
	for i := range 3 {
		call("POST", api+"/events/rows", "application/x-ndjson", fmt.Sprintf("{\"id\": %d}\n", i))
	}
	call("POST", api+"/events/lsm/flush", "", "")

	deadline := time.Now().Add(60 * time.Second)
	for {
		exposed := map[string]bool{}
		var scraped []string
		for _, p := range pods {
			a := p.m.Spec.Template.Metadata.Annotations
			if a["prometheus.io/scrape"] != "true" {
				t.Fatalf("%s: no prometheus.io/scrape annotation", p.name)
			}
			u := fmt.Sprintf("%s://127.0.0.1:%d%s", scheme(a["prometheus.io/scheme"]), p.port(t, a["prometheus.io/port"]), cmp.Or(a["prometheus.io/path"], "/metrics"))
			code, body := get(hc, u)
			if code != http.StatusOK {
				t.Fatalf("%s: the annotation scrape %s answers %d %s", p.name, u, code, body)
			}
			for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllStringSubmatch(body, -1) {
				exposed[m[1]] = true
			}
			scraped = append(scraped, u)
		}
		var missing []string
		for _, n := range queried {
			if !exposed[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			t.Logf("scraped %v: all %d metrics the dashboard and the alerts query", scraped, len(queried))
			return
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, p := range pods {
				fmt.Fprintf(&logs, "%s:\n%s\n", p.name, lastLines(p.proc.stderr(), 20))
			}
			t.Fatalf("the deployment exposes none of %v\n%s", missing, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runEnv is run with more environment variables.
func runEnv(t testing.TB, env []string, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(filepath.Join(bins, name), args...)
	cmd.Env = append(os.Environ(), env...)
	return start(t, name, cmd)
}
