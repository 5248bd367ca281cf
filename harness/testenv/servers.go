package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// Credentials of the test MinIO; they are exported to the environment as
// the standard AWS variables, so child processes inherit them.
const (
	MinIOUser     = "strata-test"
	MinIOPassword = "strata-test-secret"
	TestBucket    = "strata-test"
)

// Server is a running test server.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	Bucket   string // a bucket created for the tests
	scheme   string // "s3" or "gs"
	cmd      *exec.Cmd
	dir      string
	log      *bytes.Buffer
	mu       sync.Mutex
	// to start the same server again (Restart)
	bin    string
	args   []string
	env    []string
	probe  string
	exited chan error
}

var (
	minioOnce sync.Once
	minioSrv  *Server
	minioErr  error
	gcsOnce   sync.Once
	gcsSrv    *Server
	gcsErr    error
)

// MinIO returns the binary's MinIO server, starting it on first use.
func MinIO(t testing.TB) *Server {
	t.Helper()
	minioOnce.Do(func() { minioSrv, minioErr = startMinIO() })
	if minioErr != nil {
		need(t, "MinIO", minioErr)
	}
	return minioSrv
}

// FakeGCS returns the binary's fake-gcs-server, starting it on first use.
func FakeGCS(t testing.TB) *Server {
	t.Helper()
	gcsOnce.Do(func() { gcsSrv, gcsErr = startFakeGCS() })
	if gcsErr != nil {
		need(t, "fake-gcs-server", gcsErr)
	}
	return gcsSrv
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// URL returns a bucket URL with a fresh prefix, for one test's objects.
func (s *Server) URL(t testing.TB) string {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := unsafeChars.ReplaceAllString(t.Name(), "-")
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	prefix := strings.Trim(name, "-") + "-" + hex.EncodeToString(rnd[:])
	if s.scheme == "gs" {
		return fmt.Sprintf("gs://%s/%s", s.Bucket, prefix)
	}
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&region=us-east-1", s.Bucket, prefix, url.QueryEscape(s.Endpoint))
}

// Log returns what the server printed so far, for failure messages.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Stop kills the server (its data stays), as a crash or an outage would.
func (s *Server) Stop() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// Restart starts a stopped server again on the same address and data.
func (s *Server) Restart() error {
	return s.launch()
}

// start runs the server binary and waits until probe answers 200.
func (s *Server) start(bin string, args []string, env []string, probe string) error {
	s.bin, s.args, s.env, s.probe = bin, args, env, probe
	s.log = &bytes.Buffer{}
	if err := s.launch(); err != nil {
		return err
	}
	atExit(func() {
		_ = s.cmd.Process.Kill()
		if s.dir != "" {
			os.RemoveAll(s.dir)
		}
	})
	return nil
}

func (s *Server) launch() error {
	bin, args, env, probe := s.bin, s.args, s.env, s.probe
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stdout = lockedWriter{&s.mu, s.log}
	s.cmd.Stderr = lockedWriter{&s.mu, s.log}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	s.exited = exited
	go func() { exited <- s.cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("%s exited before it was ready: %v\n%s", bin, err, s.Log())
		default:
		}
		resp, err := http.Get(probe)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = s.cmd.Process.Kill()
	return fmt.Errorf("%s not ready after 60s\n%s", bin, s.Log())
}

func startMinIO() (*Server, error) {
	bin, err := findBinary("STRATA_MINIO", "minio")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "strata-minio-")
	if err != nil {
		return nil, err
	}
	s := &Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), Bucket: TestBucket, scheme: "s3", dir: dir}
	err = s.start(bin,
		[]string{"server", "--quiet", "--address", fmt.Sprintf("127.0.0.1:%d", port), "--console-address", fmt.Sprintf("127.0.0.1:%d", cport), dir},
		[]string{"MINIO_ROOT_USER=" + MinIOUser, "MINIO_ROOT_PASSWORD=" + MinIOPassword, "MINIO_BROWSER=off", "MINIO_UPDATE=off"},
		s.Endpoint+"/minio/health/live")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	os.Setenv("AWS_ACCESS_KEY_ID", MinIOUser)
	os.Setenv("AWS_SECRET_ACCESS_KEY", MinIOPassword)
	os.Setenv("AWS_REGION", "us-east-1")
	os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	if err := s.createS3Bucket(TestBucket); err != nil {
		return nil, err
	}
	return s, nil
}

// createS3Bucket creates a bucket with minio-go, a client apart from the
// aws-sdk-go-v2 that the code under test speaks S3 with.
func (s *Server) createS3Bucket(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := s.minioClient()
	if err != nil {
		return err
	}
	for range 50 { // MinIO may answer health before it takes writes
		if err = c.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: "us-east-1"}); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("create bucket %s on MinIO: %w", name, err)
}

func startFakeGCS() (*Server, error) {
	bin, err := findBinary("STRATA_FAKE_GCS", "fake-gcs-server")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	host := fmt.Sprintf("127.0.0.1:%d", port)
	s := &Server{Endpoint: "http://" + host, Bucket: TestBucket, scheme: "gs"}
	err = s.start(bin,
		[]string{"-scheme", "http", "-host", "127.0.0.1", "-port", fmt.Sprint(port), "-backend", "memory",
			"-public-host", host, "-external-url", s.Endpoint, "-log-level", "error"},
		nil, s.Endpoint+"/storage/v1/b")
	if err != nil {
		return nil, err
	}
	os.Setenv("STORAGE_EMULATOR_HOST", host)
	body := fmt.Sprintf(`{"name":%q}`, TestBucket)
	resp, err := http.Post(s.Endpoint+"/storage/v1/b?project=strata-test", "application/json", strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("create bucket on fake-gcs-server: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("create bucket on fake-gcs-server: %s: %s", resp.Status, msg)
	}
	return s, nil
}
