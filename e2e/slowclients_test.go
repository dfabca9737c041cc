package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/e2b"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// slowConn opens a raw connection to companion and writes the head of a
// request that announces a body of 100 bytes; auth is an extra header line
// or "".
func slowConn(t *testing.T, p *proc, auth string) net.Conn {
	t.Helper()
	u, _ := url.Parse(p.ready.URL)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := "POST /v1/workspaces HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
	if auth != "" {
		head += auth + "\r\n"
	}
	if _, err := io.WriteString(c, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

// trickle writes one byte to c every interval until c fails or stop closes.
func trickle(c net.Conn, interval time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if _, err := c.Write([]byte{' '}); err != nil {
				return
			}
		}
	}
}

// closedBy reads whatever companion answers on c until it closes the
// connection. It returns the status of the answer (0 if none) and an error
// if the connection was still open at the deadline.
func closedBy(c net.Conn, deadline time.Time) (int, error) {
	c.SetReadDeadline(deadline)
	br := bufio.NewReader(c)
	status := 0
	if resp, err := http.ReadResponse(br, nil); err == nil {
		status = resp.StatusCode
		resp.Body.Close()
	}
	_, err := io.Copy(io.Discard, br)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return status, fmt.Errorf("still open (answered %d)", status)
	}
	return status, nil
}

// TestSlowClientsAreCutOff: 50 connections trickling request bodies (half
// with the token, half without), connections trickling their headers and an
// idle keep-alive connection are all closed by companion within its bounds,
// while a WebSocket stream, which is not bound by them, stays up.
func TestSlowClientsAreCutOff(t *testing.T) {
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused",
		"--read-header-timeout", "1s", "--body-timeout", "2s", "--idle-timeout", "2s"}})
	s := p.dial(-1)
	s.next(10 * time.Second)

	stop := make(chan struct{})
	defer close(stop)
	type conn struct {
		c    net.Conn
		auth bool
		kind string
	}
	var conns []conn
	for i := range 50 {
		auth := i%2 == 0
		h := ""
		if auth {
			h = "Authorization: Bearer " + p.ready.Token
		}
		c := slowConn(t, p, h)
		go trickle(c, 200*time.Millisecond, stop)
		conns = append(conns, conn{c, auth, "slow body"})
	}
	u, _ := url.Parse(p.ready.URL)
	for range 5 {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+u.Host+"\r\n")
		go trickle(c, 200*time.Millisecond, stop)
		conns = append(conns, conn{c, false, "slow headers"})
	}
	idle, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idle.Close() })
	io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: "+u.Host+"\r\n\r\n")
	conns = append(conns, conn{idle, false, "idle"})

	// Generous: ten times the largest bound. A server without the bounds
	// keeps every one of these open for as long as the client likes.
	deadline := time.Now().Add(20 * time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []string
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, err := closedBy(c.c, deadline)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				open = append(open, fmt.Sprintf("%s #%d: %v", c.kind, i, err))
			case c.kind == "slow body" && c.auth && status != http.StatusRequestTimeout:
				open = append(open, fmt.Sprintf("slow body with the token #%d: answered %d, want 408", i, status))
			case c.kind == "slow body" && !c.auth && status != http.StatusUnauthorized:
				open = append(open, fmt.Sprintf("slow body without the token #%d: answered %d, want 401", i, status))
			case c.kind == "idle" && status != http.StatusOK:
				open = append(open, fmt.Sprintf("idle connection: its request answered %d", status))
			}
		}()
	}
	wg.Wait()
	if len(open) > 0 {
		t.Fatalf("%d of %d slow connections not handled:\n%s", len(open), len(conns), strings.Join(open, "\n"))
	}

	// Every bound has run out by now; the stream must still be up.
	if err := s.ping(10 * time.Second); err != nil {
		t.Fatalf("the WebSocket stream was cut by the HTTP bounds: %v", err)
	}
	p.must(200, "GET", "/v1/workspaces", nil, nil)
}

// TestUnauthenticatedBodyGets401AtOnce: a request without the token is
// refused before its body is read. The body timeout is left at its
// default (30 s) and not a byte of the body is sent, so an answer that
// waited for the body would not arrive within the 10 s allowed here.
func TestUnauthenticatedBodyGets401AtOnce(t *testing.T) {
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
	for _, auth := range []string{"", "Authorization: Bearer not-the-token"} {
		c := slowConn(t, p, auth)
		status, err := closedBy(c, time.Now().Add(10*time.Second))
		if err != nil || status != http.StatusUnauthorized {
			t.Fatalf("%q: status %d, %v; want 401 and the connection closed", auth, status, err)
		}
	}
}

// TestListenOnAnyLoopbackAddress: whatever loopback address companion is
// told to bind, its own ready URL is accepted by its Host allowlist, in
// desktop and serve mode, IPv4 and IPv6; another address's name is not.
func TestListenOnAnyLoopbackAddress(t *testing.T) {
	listens := []string{"127.0.0.2:0", "127.0.0.1:0"}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		ln.Close()
		listens = append(listens, "[::1]:0")
	} else {
		t.Logf("no IPv6 loopback here; [::1] not tried: %v", err)
	}
	for _, mode := range []string{"desktop", "serve"} {
		for _, listen := range listens {
			t.Run(mode+" "+listen, func(t *testing.T) {
				p := start(t, options{mode: mode, dataDir: t.TempDir(), args: []string{"--docker-scope", "unused", "--listen", listen}})
				host := strings.TrimSuffix(listen, ":0")
				if !strings.HasPrefix(p.ready.URL, "http://"+host+":") {
					t.Fatalf("ready URL %s does not name the bound address %s", p.ready.URL, listen)
				}
				p.must(200, "GET", "/v1/workspaces", nil, nil)
				resp, err := http.Get(p.ready.URL + "/healthz")
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("GET /healthz at the ready URL: %v %v", resp, err)
				}
				resp.Body.Close()
				// A name that is not this server's is still refused (the
				// probes, /healthz and /readyz, answer any Host: an
				// orchestrator probes by the pod's address).
				req, _ := http.NewRequest("GET", p.ready.URL+"/v1/workspaces", nil)
				req.Host = "rebound.attacker.test:" + p.ready.URL[strings.LastIndex(p.ready.URL, ":")+1:]
				resp, err = http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != http.StatusForbidden {
					t.Fatalf("foreign Host: %v %v", resp, err)
				}
				resp.Body.Close()
			})
		}
	}
}

// TestAllowOriginIsNormalised: --allow-origin written in upper case with
// the default port matches what a browser sends; one that cannot be an
// origin is refused at start with the reason.
func TestAllowOriginIsNormalised(t *testing.T) {
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused", "--allow-origin", "HTTP://X.example:80"}})
	for origin, want := range map[string]int{"http://x.example": 200, "http://x.example:8080": 403, "https://x.example": 403} {
		req, _ := http.NewRequest("GET", p.ready.URL+"/v1/workspaces", nil)
		req.Header.Set("Authorization", "Bearer "+p.ready.Token)
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("Origin %s: status %d, want %d", origin, resp.StatusCode, want)
		}
	}
	p.stop()

	for origin, why := range map[string]string{
		"http://x.example/app": "no path",
		"*":                    "wildcard",
		"x.example":            "scheme://host",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, companionBin, "desktop", "--data-dir", t.TempDir(), "--allow-origin", origin)
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "--allow-origin") || !strings.Contains(string(out), why) {
			t.Fatalf("--allow-origin %q: %v\n%s", origin, err, out)
		}
	}
}

// TestBodyTimeoutSparesSlowAnswers: the body timeout bounds the arrival of
// a body, not the work done after it (a timeout on the request as a whole
// would cancel it). An account add whose provider check is held past the
// body timeout still succeeds. The test releases the
// provider only once a slow-body probe, started after the account's body
// was in, has been cut off by the timeout: so the timeout has passed on
// companion's side by then.
func TestBodyTimeoutSparesSlowAnswers(t *testing.T) {
	emu := e2b.New(e2b.Options{Token: cloudToken, Clock: emulator.NewWallClock()})
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(held)
			<-release
		}
		emu.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() { emu.Close(); srv.Close() })
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused", "--body-timeout", "1s"}})

	type result struct {
		status int
		raw    []byte
	}
	added := make(chan result, 1)
	go func() {
		status, raw := p.call("POST", "/v1/accounts", map[string]any{
			"provider": "e2b", "label": "slow check", "config": map[string]string{"api_url": srv.URL},
			"credentials": map[string]string{"token": cloudToken},
		}, nil)
		added <- result{status, raw}
	}()
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the account's provider check never reached the provider")
	}
	probe := slowConn(t, p, "Authorization: Bearer "+p.ready.Token)
	if status, err := closedBy(probe, time.Now().Add(20*time.Second)); err != nil || status != http.StatusRequestTimeout {
		t.Fatalf("probe: status %d, %v; want 408", status, err)
	}
	close(release)
	select {
	case r := <-added:
		if r.status != http.StatusCreated {
			t.Fatalf("account add held past the body timeout: %d %s", r.status, r.raw)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("account add did not answer")
	}
}
