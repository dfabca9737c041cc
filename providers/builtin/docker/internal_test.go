package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/builtin/docker/internal/engine"
)

var fixedNow = time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)

func testProvider(t *testing.T, cfg Config) *Provider {
	t.Helper()
	cfg.Image = "img"
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Now = func() time.Time { return fixedNow }
	if cfg.Host == "" {
		cfg.Host = "unix:///nonexistent.sock"
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMapState(t *testing.T) {
	cases := []struct {
		st   engine.State
		want core.State
	}{
		{engine.State{Status: engine.StateRunning, Running: true}, core.StateRunning},
		{engine.State{Status: engine.StatePaused, Running: true, Paused: true}, core.StatePaused},
		{engine.State{Status: engine.StateRunning, Running: true, Paused: true}, core.StatePaused},
		{engine.State{Status: engine.StateExited}, core.StatePaused},
		{engine.State{Status: engine.StateCreated}, core.StatePaused},
		{engine.State{Status: engine.StateRestarting, Restarting: true}, core.StateResuming},
		{engine.State{Status: engine.StateRemoving}, core.StateDeleting},
		{engine.State{Status: engine.StateDead, Dead: true}, core.StateError},
		{engine.State{Status: "something-new"}, core.StateUnknown},
	}
	for _, tc := range cases {
		if got := mapState(&tc.st); got != tc.want {
			t.Errorf("mapState(%+v) = %s, want %s", tc.st, got, tc.want)
		}
	}
}

func TestPublishedURL(t *testing.T) {
	cases := []struct {
		b    []engine.PortBinding
		want string
	}{
		{[]engine.PortBinding{{HostIP: "127.0.0.1", HostPort: "49153"}}, "http://127.0.0.1:49153"},
		{[]engine.PortBinding{{HostIP: "0.0.0.0", HostPort: "5"}}, "http://127.0.0.1:5"},
		{[]engine.PortBinding{{HostIP: "::", HostPort: "7"}}, "http://127.0.0.1:7"},
		{[]engine.PortBinding{{HostIP: "", HostPort: "8"}}, "http://127.0.0.1:8"},
		{[]engine.PortBinding{{HostIP: "::1", HostPort: "6"}}, "http://[::1]:6"},
		{[]engine.PortBinding{{HostPort: ""}}, ""},
		{nil, ""},
	}
	for _, tc := range cases {
		ns := &engine.NetworkSettings{Ports: map[string][]engine.PortBinding{agentPort: tc.b}}
		if got := publishedURL(ns); got != tc.want {
			t.Errorf("publishedURL(%v) = %q, want %q", tc.b, got, tc.want)
		}
	}
	if publishedURL(nil) != "" {
		t.Error("nil settings")
	}
}

func TestParseTime(t *testing.T) {
	if !parseTime("0001-01-01T00:00:00Z").IsZero() || !parseTime("").IsZero() || !parseTime("garbage").IsZero() {
		t.Error("unset engine times must parse as zero")
	}
	got := parseTime("2026-09-01T14:00:00.123456789+02:00")
	if !got.Equal(time.Date(2026, 9, 1, 12, 0, 0, 123456789, time.UTC)) || got.Location() != time.UTC {
		t.Errorf("parseTime = %v", got)
	}
}

func inspectFixture(status, started, finished string) engine.Inspect {
	return engine.Inspect{
		ID:      "abc123",
		Name:    "/companion-ws_1",
		Created: "2026-09-01T10:00:00Z",
		State: &engine.State{
			Status: status, Running: status == engine.StateRunning,
			StartedAt: started, FinishedAt: finished,
		},
		Config: &engine.Config{
			Env: []string{"PATH=/bin", keyEnv + "=the-key"},
			Labels: map[string]string{
				LabelBox: "1", LabelScope: "s", core.LabelWorkspace: "ws_1", LabelName: "My box", "other": "x",
			},
		},
		NetworkSettings: &engine.NetworkSettings{Ports: map[string][]engine.PortBinding{
			agentPort: {{HostIP: "127.0.0.1", HostPort: "40000"}},
		}},
		Mounts: []engine.MountPoint{{Type: engine.MountVolume, Name: "vol1", Destination: workspaceDir}},
	}
}

func TestDescribeContainer(t *testing.T) {
	p := testProvider(t, Config{})
	ctx := context.Background()

	d := p.describe(ctx, inspectFixture(engine.StateRunning, "2026-09-01T10:00:01Z", "0001-01-01T00:00:00Z"), false)
	if d.ID != "abc123" || d.Name != "My box" || d.Key != "the-key" || d.URL != "http://127.0.0.1:40000" ||
		d.State != core.StateRunning || !d.PausedAt.IsZero() || d.volume != "vol1" ||
		!d.CreatedAt.Equal(time.Date(2026, 9, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("running: %+v", d)
	}
	if _, ok := d.Labels["other"]; ok || d.Labels[core.LabelWorkspace] != "ws_1" {
		t.Errorf("labels: %v", d.Labels)
	}

	// Stopped: no URL, paused_at from FinishedAt.
	d = p.describe(ctx, inspectFixture(engine.StateExited, "2026-09-01T10:00:01Z", "2026-09-01T11:00:00Z"), true)
	if d.State != core.StatePaused || d.URL != "" || !d.PausedAt.Equal(time.Date(2026, 9, 1, 11, 0, 0, 0, time.UTC)) {
		t.Errorf("stopped: %+v", d)
	}
	// Never started: paused, paused_at unknown.
	d = p.describe(ctx, inspectFixture(engine.StateCreated, "0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"), true)
	if d.State != core.StatePaused || !d.PausedAt.IsZero() {
		t.Errorf("created: %+v", d)
	}
	// Frozen (docker pause) after an earlier stop: FinishedAt predates the
	// current run and is no pause time.
	ins := inspectFixture(engine.StatePaused, "2026-09-01T11:30:00Z", "2026-09-01T11:00:00Z")
	ins.State.Running, ins.State.Paused = true, true
	d = p.describe(ctx, ins, true)
	if d.State != core.StatePaused || !d.PausedAt.IsZero() || d.URL != "" {
		t.Errorf("frozen: %+v", d)
	}
}

func TestSetSize(t *testing.T) {
	du := &usage{at: fixedNow, containers: map[string]int64{"a": 100}, volumes: map[string]int64{"v": 23}}
	d := described{Box: core.Box{ID: "a"}, volume: "v"}
	d.setSize(du)
	if d.Size == nil || d.Size.Bytes != 123 || d.Size.Source != core.SizeDockerEngineUsed || !d.Size.At.Equal(fixedNow) {
		t.Errorf("size: %+v", d.Size)
	}
	for _, d := range []described{
		{Box: core.Box{ID: "b"}, volume: "v"},  // container not measured
		{Box: core.Box{ID: "a"}, volume: "v2"}, // volume not measured
	} {
		d.setSize(du)
		if d.Size != nil {
			t.Errorf("partial measure must leave size unknown: %+v", d.Size)
		}
	}
	d = described{Box: core.Box{ID: "a"}}
	d.setSize(nil)
	if d.Size != nil {
		t.Error("no measure, no size")
	}
}

func TestLastActivity(t *testing.T) {
	p := testProvider(t, Config{ProbeTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	serve := func(h http.HandlerFunc) string {
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		return s.URL
	}
	ok := serve(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/server_info" || r.Header.Get("X-Session-API-Key") != "" {
			http.Error(w, "unexpected", 400)
			return
		}
		fmt.Fprint(w, `{"uptime":100.0,"idle_time":42.0,"title":"x","unknown_field":[1]}`)
	})
	if got := p.lastActivity(ctx, ok); !got.Equal(fixedNow.Add(-42 * time.Second)) {
		t.Errorf("lastActivity = %v", got)
	}
	for name, h := range map[string]http.HandlerFunc{
		"500":     func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) },
		"garbage": func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>") },
		"no idle": func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"uptime":1.0}`) },
		// Answers only after the prober gave up and hung up.
		"slow": func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			fmt.Fprint(w, `{"idle_time":1.0}`)
		},
	} {
		if got := p.lastActivity(ctx, serve(h)); !got.IsZero() {
			t.Errorf("%s: lastActivity = %v, want zero", name, got)
		}
	}
	if got := p.lastActivity(ctx, "http://127.0.0.1:1"); !got.IsZero() {
		t.Errorf("unreachable: %v", got)
	}
}

func TestWrap(t *testing.T) {
	p := testProvider(t, Config{Host: "tcp://127.0.0.1:1"})
	cases := []struct {
		err  error
		want core.ErrorKind
	}{
		{&engine.Error{StatusCode: 404, Message: "No such container: x"}, core.KindNotFound},
		{&engine.Error{StatusCode: 409, Message: "name in use"}, core.KindConflict},
		{&engine.Error{StatusCode: 400, Message: "bad"}, core.KindInvalid},
		{&engine.Error{StatusCode: 503, Message: "down"}, core.KindUnavailable},
		{&engine.Error{StatusCode: 403, Message: "no"}, core.KindUnauthorized},
		{&engine.Error{StatusCode: 401, Message: "who"}, core.KindUnauthorized},
		{&engine.Error{StatusCode: 500, Message: "boom"}, core.KindInternal},
		{&engine.ConnError{Host: "unix:///x.sock", Err: errors.New("dial unix /x.sock: connect: no such file or directory")}, core.KindUnavailable},
		{context.DeadlineExceeded, core.KindUnavailable},
		{fmt.Errorf("op: %w", context.Canceled), core.KindUnavailable},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), core.KindUnavailable},
		{&net.OpError{Op: "read", Net: "unix", Err: syscall.ECONNRESET}, core.KindUnavailable},
		{errors.New("something else"), core.KindInternal},
	}
	for _, tc := range cases {
		got := p.wrap(tc.err, "inspect", "box1")
		if core.KindOf(got) != tc.want {
			t.Errorf("wrap(%v) kind %s, want %s", tc.err, core.KindOf(got), tc.want)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("wrap(%v) lost its cause", tc.err)
		}
	}
	for cause, want := range map[string]string{
		"dial unix /var/run/docker.sock: connect: permission denied": "add the user to the docker group",
		"dial unix /var/run/docker.sock: connect: no such file":      "start Docker or set DOCKER_HOST",
	} {
		got := p.wrap(&engine.ConnError{Host: "unix:///var/run/docker.sock", Err: errors.New(cause)}, "list boxes", "")
		if core.KindOf(got) != core.KindUnavailable || !strings.Contains(got.Error(), want) {
			t.Errorf("connection failure %q: %v", cause, got)
		}
	}
	if got := p.wrap(context.DeadlineExceeded, "stop", "box1"); !strings.Contains(got.Error(), "did not answer in time") {
		t.Errorf("timeout message: %v", got)
	}
	// A secret the engine echoes is cut from message and cause.
	leak := &engine.Error{StatusCode: 400, Message: "invalid env OH_SESSION_API_KEYS_0=s3cr3t-key"}
	got := p.wrapSecret(leak, "create", "", "s3cr3t-key")
	var ce *core.Error
	if !errors.As(got, &ce) || strings.Contains(ce.Message, "s3cr3t-key") || strings.Contains(ce.Err.Error(), "s3cr3t-key") {
		t.Errorf("secret leaked: %+v", ce)
	}
	if ce.Kind != core.KindInvalid {
		t.Errorf("scrubbing changed the kind: %s", ce.Kind)
	}
	if p.wrap(nil, "x", "") != nil {
		t.Error("wrap(nil) must be nil")
	}
}

// TestUnusableHost: a host the client cannot speak to makes the provider
// unavailable with the fix, not a failed New.
func TestUnusableHost(t *testing.T) {
	t.Setenv("DOCKER_API_VERSION", "")
	t.Setenv("DOCKER_CERT_PATH", "")
	t.Setenv("DOCKER_TLS_VERIFY", "")
	p := testProvider(t, Config{Host: "ssh://me@box"})
	err := p.Ping(context.Background())
	if core.KindOf(err) != core.KindUnavailable || !strings.Contains(err.Error(), "ssh://me@box is not usable") || !strings.Contains(err.Error(), "DOCKER_HOST") {
		t.Errorf("ping: %v", err)
	}
	if _, err := p.List(context.Background(), core.Account{}); core.KindOf(err) != core.KindUnavailable {
		t.Errorf("list: %v", err)
	}
}

// TestMissingSocket: nothing at the socket is "not reachable", with
// what to do.
func TestMissingSocket(t *testing.T) {
	p := testProvider(t, Config{Host: "unix://" + t.TempDir() + "/none.sock"})
	err := p.Ping(context.Background())
	if core.KindOf(err) != core.KindUnavailable || !strings.Contains(err.Error(), "not reachable") || !strings.Contains(err.Error(), "start Docker") {
		t.Errorf("ping: %v", err)
	}
}
