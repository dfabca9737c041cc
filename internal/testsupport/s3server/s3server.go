// Package s3server starts a real S3 server for tests: versitygw over a
// temporary directory, on a free loopback port, one per test. Each
// top-level directory of Dir is a bucket and each object a file, so a test
// can look at (or damage) what was written.
//
// The binary is found in $COMPANION_VERSITYGW, <repo>/.cache/bin (where
// scripts/versitygw.sh installs it) or PATH. Without it the test is
// skipped, or failed under COMPANION_REQUIRE_STORES=1.
package s3server

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// Credentials and region the server accepts.
const (
	AccessKey = "companion-test-access"
	SecretKey = "companion-test-secret-0123456789"
	Region    = "us-east-1"
)

// Server is a running versitygw.
type Server struct {
	// Endpoint is http://127.0.0.1:PORT.
	Endpoint string
	// Dir is the directory it serves.
	Dir string
}

// Binary returns versitygw's path, or "" when it is not installed.
func Binary() string {
	if p := os.Getenv("COMPANION_VERSITYGW"); p != "" {
		return p
	}
	if root := repoRoot(); root != "" {
		p := filepath.Join(root, ".cache", "bin", "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	return ""
}

func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/canvasapp/companion\n")) {
				return dir
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Start runs versitygw for tb with the named buckets created, and stops
// it when tb ends.
func Start(tb testing.TB, buckets ...string) *Server {
	tb.Helper()
	bin := Binary()
	if bin == "" {
		testsupport.SkipUnlessRequired(tb, testsupport.RequireStores, "versitygw not installed (run scripts/versitygw.sh)")
	}
	dir := tb.TempDir()
	for _, b := range buckets {
		if err := os.Mkdir(filepath.Join(dir, b), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := start(tb, bin, dir)
		if err == nil {
			return s
		}
		lastErr = err
	}
	testsupport.SkipUnlessRequired(tb, testsupport.RequireStores, "versitygw did not start: %v", lastErr)
	return nil
}

func start(tb testing.TB, bin, dir string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--region", Region, "--port", addr, "posix", dir)
	out := &testsupport.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("versitygw exited (%v): %s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return nil, fmt.Errorf("versitygw did not listen on %s: %s", addr, out.String())
		}
	}
	tb.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	return &Server{Endpoint: "http://" + addr, Dir: dir}, nil
}

// URL is an s3:// store URL for bucket and prefix on this server.
func (s *Server) URL(bucket, prefix string) string {
	u := url.URL{Scheme: "s3", Host: bucket, Path: "/" + prefix}
	u.RawQuery = url.Values{"endpoint": {s.Endpoint}, "region": {Region}}.Encode()
	return u.String()
}

// ObjectPath is the file that holds key in bucket.
func (s *Server) ObjectPath(bucket, key string) string {
	return filepath.Join(s.Dir, bucket, filepath.FromSlash(key))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
