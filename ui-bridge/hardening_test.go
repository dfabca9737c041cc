package uibridge

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNormalizeOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"HTTP://X.example":           "http://x.example",
		"http://x.example:80":        "http://x.example",
		"HTTPS://App.Example:443/":   "https://app.example",
		"https://app.example:8443":   "https://app.example:8443",
		"http://localhost:05173":     "http://localhost:5173",
		"app://Canvas":               "app://canvas",
		"http://[::1]:3000":          "http://[::1]:3000",
		"http://[::1]:80":            "http://[::1]",
		" http://127.0.0.1:5173 ":    "http://127.0.0.1:5173",
		"https://xn--bcher-kva.test": "https://xn--bcher-kva.test",
	} {
		got, err := NormalizeOrigin(in)
		if err != nil || got != want {
			t.Errorf("NormalizeOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, why := range map[string]string{
		"":                        "empty",
		"*":                       "wildcard",
		"null":                    "null",
		"x.example":               "scheme://host",
		"http://x.example/app":    "no path",
		"http://x.example?a=1":    "no path, query",
		"http://x.example#top":    "no path, query or fragment",
		"http://me@x.example":     "user name",
		"http://x.example:0":      "1 to 65535",
		"http://x.example:99999":  "1 to 65535",
		"http://x.example:":       "port",
		"https://bücher.test":     "punycode",
		"mailto:someone@x.test":   "scheme://host",
		"http://x.example:80/a/b": "no path",
	} {
		got, err := NormalizeOrigin(in)
		if err == nil {
			t.Errorf("NormalizeOrigin(%q) = %q, want an error about %s", in, got, why)
			continue
		}
		if !strings.Contains(err.Error(), why) {
			t.Errorf("NormalizeOrigin(%q): %v; want it to mention %q", in, err, why)
		}
	}
}

// An allowlist entry written in upper case with the default port matches
// the origin a browser sends; before normalisation it never could.
func TestGateMatchesNormalisedOrigin(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.AllowedOrigins = []string{"HTTP://App.Example:80"} })
	resp, body := e.do("GET", "/v1/workspaces", "", "Origin", "http://app.example")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("allowed origin refused: %d %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "http://app.example" {
		t.Fatalf("Access-Control-Allow-Origin = %q", got)
	}
	resp, body = e.do("GET", "/v1/workspaces", "", "Origin", "http://app.example:8080")
	e.expectError(resp, body, http.StatusForbidden, codeForbiddenOrigin)
}

func TestListenerHosts(t *testing.T) {
	for _, c := range []struct {
		addr net.TCPAddr
		want []string
	}{
		{net.TCPAddr{IP: net.ParseIP("127.0.0.2"), Port: 4242}, []string{"127.0.0.2:4242", "127.0.0.1:4242", "localhost:4242", "[::1]:4242"}},
		{net.TCPAddr{IP: net.ParseIP("::1"), Port: 7}, []string{"[::1]:7", "127.0.0.1:7", "localhost:7"}},
		{net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 9}, []string{"127.0.0.1:9", "localhost:9", "[::1]:9"}},
		{net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 80}, []string{"10.1.2.3:80"}},
	} {
		got := ListenerHosts(&c.addr)
		if !slices.Equal(got, c.want) {
			t.Errorf("ListenerHosts(%v) = %q, want %q", &c.addr, got, c.want)
		}
	}
}

// rawRequest opens a connection to the test server and writes a request
// head announcing a body of n bytes, sending none of it.
func rawRequest(t *testing.T, e *testEnv, path string, n int, hdr ...string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := "POST " + path + " HTTP/1.1\r\nHost: " + strings.TrimPrefix(e.base, "http://") +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(n) + "\r\n"
	for _, h := range hdr {
		head += h + "\r\n"
	}
	if _, err := io.WriteString(c, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

// readAnswer reads one response from c, failing if none arrives in time.
func readAnswer(t *testing.T, c net.Conn, within time.Duration) *http.Response {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer within %v: %v", within, err)
	}
	resp.Body.Close()
	return resp
}

// waitClosed reads from c until the server closes it, failing after within.
func waitClosed(t *testing.T, c net.Conn, within time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server kept the connection open for more than %v", within)
	}
}

// A request without a valid token is answered 401 without its body being
// read, and the connection is closed: a body that never comes cannot hold
// it. The body timeout is set far beyond the test's patience, so an answer
// that waited for it would fail the test.
func TestUnauthenticatedBodyRefusedBeforeItArrives(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.BodyTimeout = time.Hour })
	for name, auth := range map[string][]string{
		"no token":    nil,
		"wrong token": {"Authorization: Bearer wrong"},
	} {
		t.Run(name, func(t *testing.T) {
			c := rawRequest(t, e, "/v1/workspaces", 500, auth...)
			resp := readAnswer(t, c, 10*time.Second)
			if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
				t.Fatalf("status %d, close %v; want 401 and the connection closed", resp.StatusCode, resp.Close)
			}
			waitClosed(t, c, 10*time.Second)
		})
	}
}

// A client with the token that does not send its announced body gets 408
// once the body timeout runs out, and its connection is closed.
func TestSlowBodyCutAtBodyTimeout(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.BodyTimeout = 300 * time.Millisecond })
	c := rawRequest(t, e, "/v1/workspaces", 500, "Authorization: Bearer "+e.token)
	io.WriteString(c, `{"na`)
	resp := readAnswer(t, c, 20*time.Second)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", resp.StatusCode)
	}
	waitClosed(t, c, 20*time.Second)
}
