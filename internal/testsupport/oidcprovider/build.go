// Package oidcprovider runs real OpenID Connect parts for tests: the example
// OpenID provider of github.com/zitadel/oidc/v3 and oauth2-proxy, each
// built from its Go module (never a downloaded binary), plus helpers that
// sign in through them the way a browser does (a cookie jar, redirects, the
// provider's login form).
//
// Both are built once per version into the user cache directory, so a
// second test run, or a second package in the same run, starts them in
// milliseconds. A part that cannot be built or started fails the test: the
// module proxy is available wherever `make test` runs.
package oidcprovider

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/canvasapp/companion/internal/testsupport"
)

// Versions of the parts, pinned: the demo clients and users below were read
// from the example server's source at ZitadelVersion.
const (
	ZitadelVersion     = "v3.52.0"
	OAuth2ProxyVersion = "v7.15.6"

	zitadelPkg     = "github.com/zitadel/oidc/v3/example/server"
	oauth2ProxyPkg = "github.com/oauth2-proxy/oauth2-proxy/v7"
)

var buildMu sync.Mutex

// binary returns the path of pkg@version's command, building it with
// `go install` (which names it builtName) into <user cache>/companion-tests/<name>-<version>/ when it
// is not there yet. The build goes to a temporary directory first and is
// renamed into place, so a concurrent test binary never runs half a file;
// a lock on the directory makes the others wait instead of building too.
func binary(tb testing.TB, pkg, version, builtName, name string) string {
	tb.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "companion-tests", name+"-"+version)
	bin := filepath.Join(dir, name)
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatalf("oidcprovider: %v", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		tb.Fatalf("oidcprovider: locking %s: %v", dir, err)
	}
	defer unlock()
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin // another test binary built it while this one waited
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		tb.Fatalf("oidcprovider: %v", err)
	}
	defer os.RemoveAll(tmp)
	tb.Logf("oidcprovider: building %s@%s (once per version; cached in %s)", pkg, version, dir)
	cmd := exec.Command("go", "install", pkg+"@"+version)
	// Outside any module and workspace, so companion's go.mod plays no part.
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-buildvcs=false")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tb.Fatalf("oidcprovider: building %s@%s failed (the Go module proxy must be reachable): %v\n%s", pkg, version, err, out.String())
	}
	built := filepath.Join(tmp, builtName)
	if err := os.Rename(built, bin); err != nil {
		tb.Fatalf("oidcprovider: installing %s: %v", name, err)
	}
	return bin
}

// syncBuffer collects a process's output for the failure message.
type syncBuffer = testsupport.SyncBuffer

// run starts bin with args and env, stops it (SIGKILL is fine: both are
// stateless test servers) when tb ends, and prints its output if tb failed.
func run(tb testing.TB, what, bin string, args, env []string) (*exec.Cmd, *syncBuffer, <-chan struct{}) {
	tb.Helper()
	logs := &syncBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		tb.Fatalf("oidcprovider: starting %s: %v", what, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if tb.Failed() {
			tb.Logf("%s output:\n%s", what, logs.String())
		}
	})
	return cmd, logs, done
}

// FreePort returns a loopback port that was free a moment ago, for a part
// whose URL must be known before it starts (a redirect URL to register).
func FreePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("oidcprovider: free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
