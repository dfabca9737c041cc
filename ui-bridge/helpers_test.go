package uibridge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport"
)

const testToken = "tok-3b7e9f0c2d4a4e6b8c1d5f7a9e0b2c4d"

// syncBuffer collects log output from several goroutines.
type syncBuffer = testsupport.SyncBuffer

// testEnv is a real server: a SQLite store in a temp dir, a core.Service
// over it, and the ui-bridge served on a loopback listener.
type testEnv struct {
	t     *testing.T
	st    *db.Store
	reg   *core.Registry
	svc   *core.Service
	srv   *Server
	hs    *http.Server
	port  int
	base  string
	logs  *syncBuffer
	token string
}

func openStore(t testing.TB) *db.Store {
	t.Helper()
	st, err := db.Open(context.Background(), filepath.Join(t.TempDir(), "companion.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newEnv(t *testing.T, mod func(*Config)) *testEnv {
	t.Helper()
	return newEnvWith(t, openStore(t), &core.Registry{}, mod)
}

func newEnvWith(t testing.TB, st *db.Store, reg *core.Registry, mod func(*Config)) *testEnv {
	t.Helper()
	ctx := context.Background()
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	svc, err := core.NewService(ctx, core.Config{Store: st, Providers: reg, Logger: log})
	if err != nil {
		t.Fatalf("new service: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	cfg := Config{
		Service:      svc,
		Token:        testToken,
		AllowedHosts: LoopbackHosts(port),
		Version:      "test-1",
		Logger:       log,
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		ln.Close()
		t.Fatalf("new server: %v", err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	e := &testEnv{st: st, reg: reg, svc: svc, srv: srv, hs: hs, port: port, base: "http://127.0.0.1:" + strconv.Itoa(port), logs: logs, token: testToken}
	if tt, ok := t.(*testing.T); ok {
		e.t = tt
	}
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		svc.Close(cctx)
	})
	return e
}

// do sends a request with the token and, when body is not empty, the JSON
// content type. hdr are key/value pairs; an empty value removes a header.
func (e *testEnv) do(method, path, body string, hdr ...string) (*http.Response, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, b
}

// errorOf decodes an error answer and checks its status and code.
func (e *testEnv) expectError(resp *http.Response, body []byte, status int, code string) ErrorDetail {
	e.t.Helper()
	if resp.StatusCode != status {
		e.t.Fatalf("%s %s: status %d, want %d; body %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		e.t.Fatalf("error Content-Type %q, want application/json", ct)
	}
	var er ErrorResponse
	if err := json.Unmarshal(body, &er); err != nil {
		e.t.Fatalf("error body is not JSON: %v: %s", err, body)
	}
	if er.Error.Code != code {
		e.t.Fatalf("error code %q, want %q (message %q)", er.Error.Code, code, er.Error.Message)
	}
	if er.Error.Message == "" {
		e.t.Fatalf("error without message: %s", body)
	}
	return er.Error
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %T: %v: %s", v, err, b)
	}
	return v
}

// dial opens the stream with the bearer header and the companion.v1
// subprotocol unless opts says otherwise.
func (e *testEnv) dial(ctx context.Context, query string, opts *dialOptions) (*websocket.Conn, *http.Response, error) {
	if opts == nil {
		opts = &dialOptions{}
	}
	if opts.Subprotocols == nil {
		opts.Subprotocols = []string{Subprotocol}
	}
	if opts.HTTPHeader == nil {
		opts.HTTPHeader = http.Header{"Authorization": {"Bearer " + e.token}}
	}
	u := "ws://127.0.0.1:" + strconv.Itoa(e.port) + "/v1/ws" + query
	return wsDial(ctx, u, opts)
}

func (e *testEnv) mustDial(query string) *websocket.Conn {
	e.t.Helper()
	c, _, err := e.dial(context.Background(), query, nil)
	if err != nil {
		e.t.Fatalf("dial: %v", err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// readMsg reads one stream message, failing the test after 10 s.
func readMsg(t *testing.T, c *websocket.Conn) Message {
	t.Helper()
	m, err := tryReadMsg(c, 10*time.Second)
	if err != nil {
		t.Fatalf("read stream message: %v", err)
	}
	return m
}

func tryReadMsg(c *websocket.Conn, timeout time.Duration) (Message, error) {
	c.SetReadDeadline(time.Now().Add(timeout))
	typ, b, err := c.ReadMessage()
	if err != nil {
		return Message{}, err
	}
	if typ != websocket.TextMessage {
		return Message{}, errors.New("binary message on the stream")
	}
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		return Message{}, err
	}
	return m, nil
}

// save writes ws through the feed, as core's actions do.
func (e *testEnv) save(ws core.Workspace) core.Workspace {
	e.t.Helper()
	saved, err := e.svc.Feed().Save(context.Background(), ws)
	if err != nil {
		e.t.Fatalf("save workspace: %v", err)
	}
	return saved
}

func testWorkspace(name string) core.Workspace {
	return core.Workspace{
		ID:        core.NewID("ws"),
		Name:      name,
		AccountID: "acc_test",
		Provider:  "docker",
		State:     core.StateRunning,
		BoxID:     "box-" + name,
		CreatedAt: time.Now().UTC(),
	}
}

// eventually polls cond until it holds, failing the test after 20 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testsupport.Until(t, 20*time.Second, what, cond)
}

func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
