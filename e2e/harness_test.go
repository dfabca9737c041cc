package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/apicontract"
)

// companionBin is the binary under test, built once by TestMain.
var companionBin string

// contract checks every exchange with a companion the suite started
// against ui-bridge/openapi.json: TestMain makes it http.DefaultTransport,
// start registers each process, and a breach fails the test that made it.
var contract *apicontract.Checker

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "companion-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	companionBin = filepath.Join(dir, "companion")
	doc, err := os.ReadFile("../ui-bridge/openapi.json")
	if err == nil {
		contract, err = apicontract.Load(doc)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: the API contract:", err)
		os.Exit(1)
	}
	http.DefaultTransport = contract.Transport(http.DefaultTransport)
	// The first-party provider modules are embedded in the binary; make
	// sure they are built (a no-op when they are up to date).
	mods := exec.Command("bash", "../scripts/build-modules.sh")
	mods.Stdout, mods.Stderr = os.Stderr, os.Stderr
	if err := mods.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building provider modules:", err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-ldflags", "-X main.version=e2e", "-o", companionBin, "github.com/canvasapp/companion/cmd/companion")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building companion:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	fmt.Fprintf(os.Stderr, "e2e: %d exchanges and stream messages were checked against the API contract\n", contract.Checked())
	if f := os.Getenv("COMPANION_CONTRACT_COVERAGE"); f != "" {
		// Which operations the run reached, with the statuses they answered.
		os.WriteFile(f, []byte(strings.Join(contract.Coverage(), "\n")+"\n"), 0o644)
	}
	if f := contract.Failures(); len(f) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: %d exchanges broke the API contract:\n%s\n", len(f), strings.Join(f, "\n"))
		code = 1
	}
	os.Exit(code)
}

// ready is the line desktop mode prints once it serves.
type ready struct {
	Event   string `json:"event"`
	URL     string `json:"url"`
	Token   string `json:"token"`
	Version string `json:"version"`
	PageURL string `json:"page_url"`
}

// proc is one running companion process.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	ready  ready
	stderr *syncBuffer
	done   chan struct{}
	exit   error
}

type syncBuffer = testsupport.SyncBuffer

// options for starting companion.
type options struct {
	mode    string // "desktop" (default) or "serve"
	dataDir string
	args    []string
	env     []string
}

// start launches companion as Electron would: stdin a pipe, stdout read for
// the ready line, stderr collected (and printed if the test fails).
func start(t *testing.T, o options) *proc {
	t.Helper()
	if o.mode == "" {
		o.mode = "desktop"
	}
	args := append([]string{o.mode, "--data-dir", o.dataDir, "--log-format", "json", "--reconcile-interval", "1s"}, o.args...)
	if o.mode == "serve" && !hasListen(o.args) {
		// serve's default is 127.0.0.1:8080, which a test on a shared
		// machine must not count on being free.
		args = append(args, "--listen", "127.0.0.1:0")
	}
	cmd := exec.Command(companionBin, args...)
	cmd.Env = append(os.Environ(), o.env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, stdin: stdin, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exit = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("companion stderr:\n%s", p.stderr.String())
		}
	})

	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
				t.Errorf("companion printed more than one line on stdout: %q", sc.Text())
			}
		}
	}()
	select {
	case line := <-lines:
		if err := json.Unmarshal([]byte(line), &p.ready); err != nil || p.ready.Event != "ready" {
			t.Fatalf("bad ready line %q: %v", line, err)
		}
		p.checkContract()
	case <-p.done:
		t.Fatalf("companion exited before ready: %v\n%s", p.exit, p.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("no ready line within 30s\n%s", p.stderr.String())
	}
	return p
}

// checkContract has the exchanges with p checked against the API
// document; the breaches fail the test when it ends.
func (p *proc) checkContract() {
	url := p.ready.URL
	contract.Register(url)
	p.t.Cleanup(func() {
		for _, f := range contract.Forget(url) {
			p.t.Error(f)
		}
	})
}

// hasListen reports whether args choose the listen address.
func hasListen(args []string) bool {
	for _, a := range args {
		if a == "--listen" || strings.HasPrefix(a, "--listen=") {
			return true
		}
	}
	return false
}

// stop closes stdin (the parent app went away) and waits for a clean exit.
func (p *proc) stop() {
	p.t.Helper()
	p.stdin.Close()
	select {
	case <-p.done:
		if p.exit != nil {
			p.t.Fatalf("companion exited with %v after stdin closed\n%s", p.exit, p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		p.t.Fatalf("companion did not exit after stdin closed")
	}
}

// kill sends SIGKILL: no clean-up runs, as in a crash.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// apiError is the JSON error envelope.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		State   string `json:"state"`
	} `json:"error"`
}

// call makes an authenticated JSON request and decodes the response into
// out (if non-nil). It returns the status code and the raw body.
func (p *proc) call(method, path string, body any, out any) (int, []byte) {
	p.t.Helper()
	return p.callWith(http.DefaultClient, method, path, body, out)
}

// callWith is call with a client of the caller's (one with a timeout).
func (p *proc) callWith(c *http.Client, method, path string, body, out any) (int, []byte) {
	p.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	case string:
		r = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			p.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, p.ready.URL+path, r)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.ready.Token)
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			p.t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, raw
}

// must is call that fails the test unless the status is want.
func (p *proc) must(want int, method, path string, body any, out any) []byte {
	p.t.Helper()
	got, raw := p.call(method, path, body, out)
	if got != want {
		p.t.Fatalf("%s %s: status %d, want %d: %s", method, path, got, want, raw)
	}
	return raw
}

// wsMsg is one stream message.
type wsMsg struct {
	Type       string          `json:"type"`
	Rev        int64           `json:"rev"`
	ServerTime time.Time       `json:"server_time"`
	Workspaces []workspace     `json:"workspaces"`
	Workspace  *workspace      `json:"workspace"`
	ID         string          `json:"id"`
	Raw        json.RawMessage `json:"-"`
}

// workspace is the wire form of a workspace.
type workspace struct {
	ID             string     `json:"id"`
	Name           string     `json:"name"`
	Provider       string     `json:"provider"`
	AccountID      string     `json:"account_id"`
	State          string     `json:"state"`
	BoxID          string     `json:"box_id"`
	BoxURL         string     `json:"box_url"`
	Adopted        bool       `json:"adopted"`
	PausedAt       *time.Time `json:"paused_at"`
	SizeBytes      *int64     `json:"size_bytes"`
	SizeSource     *string    `json:"size_source"`
	SizeAt         *time.Time `json:"size_at"`
	LastActivityAt *time.Time `json:"last_activity_at"`
	Keep           bool       `json:"keep"`
	DeleteAfter    *time.Time `json:"delete_after"`
	Error          string     `json:"error"`
	Rev            int64      `json:"rev"`
}

// stream is a WebSocket subscription.
type stream struct {
	t    *testing.T
	conn *websocket.Conn
	msgs chan wsMsg
	errc chan error
	// seen holds every message received, for checks that no secret was
	// ever sent.
	seen *syncBuffer
	// pongs receives the server's answers to ping.
	pongs chan struct{}
}

// ping sends a ping and waits for the server's pong.
func (s *stream) ping(timeout time.Duration) error {
	if err := s.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(timeout)); err != nil {
		return err
	}
	select {
	case <-s.pongs:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("no pong within %v", timeout)
	}
}

// dial opens the stream; since < 0 means no ?since.
func (p *proc) dial(since int64) *stream {
	p.t.Helper()
	url := strings.Replace(p.ready.URL, "http://", "ws://", 1) + "/v1/ws"
	if since >= 0 {
		url += fmt.Sprintf("?since=%d", since)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := websocket.Dialer{Subprotocols: []string{"companion.v1"}}
	h := http.Header{"Authorization": {"Bearer " + p.ready.Token}}
	conn, resp, err := d.DialContext(ctx, url, h)
	contract.CheckHandshake(url, h, resp)
	if err != nil {
		p.t.Fatalf("dial %s: %v", url, err)
	}
	return watch(p.t, conn)
}

// watch reads conn's messages into a stream until it ends; a message that
// is not JSON ends it too. The connection closes with the test.
func watch(t *testing.T, conn *websocket.Conn) *stream {
	conn.SetReadLimit(64 << 20)
	s := &stream{t: t, conn: conn, msgs: make(chan wsMsg, 1024), errc: make(chan error, 1), seen: &syncBuffer{}, pongs: make(chan struct{}, 1)}
	conn.SetPongHandler(func(string) error {
		select {
		case s.pongs <- struct{}{}:
		default:
		}
		return nil
	})
	go func() {
		for {
			_, data, err := conn.ReadMessage()
			if err != nil {
				s.errc <- err
				close(s.msgs)
				return
			}
			var m wsMsg
			if err := json.Unmarshal(data, &m); err != nil {
				s.errc <- fmt.Errorf("bad message %q: %w", data, err)
				close(s.msgs)
				return
			}
			m.Raw = data
			contract.CheckMessage(conn.RemoteAddr().String(), data)
			s.seen.Write(append(data, '\n'))
			s.msgs <- m
		}
	}()
	t.Cleanup(func() { conn.Close() })
	return s
}

// next returns the next message or fails after timeout.
func (s *stream) next(timeout time.Duration) wsMsg {
	s.t.Helper()
	select {
	case m, ok := <-s.msgs:
		if !ok {
			s.t.Fatalf("stream closed: %v", <-s.errc)
		}
		return m
	case <-time.After(timeout):
		s.t.Fatalf("no stream message within %v", timeout)
	}
	return wsMsg{}
}

// waitFor reads messages until pred accepts one.
func (s *stream) waitFor(what string, timeout time.Duration, pred func(wsMsg) bool) wsMsg {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			s.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		select {
		case m, ok := <-s.msgs:
			if !ok {
				s.t.Fatalf("stream closed while waiting for %s: %v", what, <-s.errc)
			}
			if pred(m) {
				return m
			}
		case <-time.After(left):
			s.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// upsertOf matches an upsert of workspace id in the given state.
func upsertOf(id, state string) func(wsMsg) bool {
	return func(m wsMsg) bool {
		return m.Type == "upsert" && m.Workspace != nil && m.Workspace.ID == id && m.Workspace.State == state
	}
}

// waitState polls GET /v1/workspaces/{id} until the workspace is in state.
func (p *proc) waitState(id, state string, timeout time.Duration) workspace {
	p.t.Helper()
	var got struct{ Workspace workspace }
	testsupport.Poll(p.t, timeout, func() error {
		status, raw := p.call("GET", "/v1/workspaces/"+id, nil, &got)
		if status == 200 && got.Workspace.State == state {
			return nil
		}
		return fmt.Errorf("workspace %s not %s: %d %s", id, state, status, raw)
	})
	return got.Workspace
}
