package docker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/dockertest"
	"github.com/canvasapp/companion/providers/builtin/docker"
)

// These tests drive the machine's real Docker Engine with the box image of
// e2e/boximage (the agent-server emulator FROM scratch). Each test has its
// own scope and removes every container and volume of that scope when it
// ends, failed or not. -short skips them.

func boxImage(t *testing.T) string { return dockertest.BoxImage(t) }

// logBuffer collects the provider's logs so tests can check that no box key
// is ever written to them.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type fixture struct {
	t     *testing.T
	p     *docker.Provider
	scope string
	logs  *logBuffer
	cli   *client.Client
	acct  core.Account
}

func newFixture(t *testing.T, cfg docker.Config) *fixture {
	t.Helper()
	img := boxImage(t)
	if cfg.Image == "" {
		cfg.Image = img
	}
	if cfg.Scope == "" {
		cfg.Scope = dockertest.Scope(t)
	}
	logs := &logBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p, err := docker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return &fixture{t: t, p: p, scope: cfg.Scope, logs: logs, cli: cli, acct: core.Account{ID: "acc_local", Provider: "docker"}}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (f *fixture) create(ws string, opts map[string]string) core.Box {
	f.t.Helper()
	b, err := f.p.Create(ctxT(f.t), f.acct, core.CreateSpec{WorkspaceID: ws, Name: "name of " + ws, Options: opts})
	if err != nil {
		f.t.Fatalf("create %s: %v", ws, err)
	}
	return b
}

// waitActivity polls Get until the agent-server answered (the box may still
// be booting right after a start).
func (f *fixture) waitActivity(id string) core.Box {
	f.t.Helper()
	var b core.Box
	testsupport.Poll(f.t, 20*time.Second, func() error {
		var err error
		if b, err = f.p.Get(ctxT(f.t), f.acct, id); err != nil {
			f.t.Fatalf("get %s: %v", id, err)
		}
		if b.LastActivityAt.IsZero() {
			return fmt.Errorf("box %s never reported last activity: %+v", id, b)
		}
		return nil
	})
	return b
}

// call sends a request to a box's agent-server.
func call(t *testing.T, method, url, key, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-Session-API-Key", key)
	}
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// waitListening waits until the box's agent-server answers at all.
func waitListening(t *testing.T, url string) {
	t.Helper()
	hc := http.Client{Timeout: 5 * time.Second}
	testsupport.Poll(t, 30*time.Second, func() error {
		resp, err := hc.Get(url + "/server_info")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
}

func idleTime(t *testing.T, url string) float64 {
	t.Helper()
	code, raw := call(t, "GET", url+"/server_info", "", "")
	if code != 200 {
		t.Fatalf("server_info: %d %s", code, raw)
	}
	var info struct {
		IdleTime float64 `json:"idle_time"`
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		t.Fatal(err)
	}
	return info.IdleTime
}

func wantKind(t *testing.T, err error, kind core.ErrorKind, what string) {
	t.Helper()
	if !core.IsKind(err, kind) {
		t.Fatalf("%s: got %v (kind %q), want kind %q", what, err, core.KindOf(err), kind)
	}
}

func TestLifecycle(t *testing.T) {
	// The box starts out idle for an hour: the agent-server's idle clock
	// runs inside the container, where no injected clock reaches.
	f := newFixture(t, docker.Config{Image: dockertest.BoxImageEnv(t, map[string]string{"EMULATOR_IDLE_AT_START_SECONDS": "3600"})})
	ctx := ctxT(t)
	before := time.Now().Add(-time.Second)

	box := f.create("ws_life", nil)
	if box.State != core.StateRunning || !strings.HasPrefix(box.URL, "http://127.0.0.1:") || len(box.Key) != 64 || box.ID == "" {
		t.Fatalf("created box: %+v", box)
	}
	if box.Labels[core.LabelWorkspace] != "ws_life" || box.Name != "name of ws_life" || box.CreatedAt.Before(before) {
		t.Errorf("created box labels/name/created: %+v", box)
	}
	if box.Size == nil || box.Size.Source != core.SizeDockerEngineUsed || box.Size.At.Before(before) || box.Size.Bytes < 0 {
		t.Errorf("created box size: %+v", box.Size)
	}

	// The key is the agent-server's, and only it opens /api.
	api := box.URL + "/api/conversations/count"
	// The container runs before its server listens: Docker's published
	// port may reset a connection made in between.
	waitListening(t, box.URL)
	if code, raw := call(t, "GET", api, box.Key, ""); code != 200 {
		t.Fatalf("key refused: %d %s", code, raw)
	}
	if code, _ := call(t, "GET", api, "wrong-key", ""); code != 401 {
		t.Errorf("wrong key: %d, want 401", code)
	}
	if code, _ := call(t, "GET", api, "", ""); code != 401 {
		t.Errorf("no key: %d, want 401", code)
	}

	// Last activity comes from idle_time, and reading it does not reset it.
	got := f.waitActivity(box.ID)
	first := got.LastActivityAt
	if age := time.Since(first); age < 59*time.Minute {
		t.Errorf("last activity %v ago, want the box's idle_time of an hour", age)
	}
	if idle := idleTime(t, box.URL); idle < 3600 {
		t.Errorf("idle_time = %v after create and probes, want 3600; the provider's probes must not reset it", idle)
	}
	got = f.waitActivity(box.ID)
	if d := got.LastActivityAt.Sub(first); d > 1500*time.Millisecond || d < -1500*time.Millisecond {
		t.Errorf("last activity moved from %v to %v without activity", first, got.LastActivityAt)
	}
	// Real activity moves it.
	if code, raw := call(t, "POST", box.URL+"/api/bash/execute_bash_command", box.Key, `{"command":"echo hi"}`); code != 200 {
		t.Fatalf("bash: %d %s", code, raw)
	}
	got = f.waitActivity(box.ID)
	if !got.LastActivityAt.After(first.Add(1500 * time.Millisecond)) {
		t.Errorf("last activity %v did not move after activity (was %v)", got.LastActivityAt, first)
	}

	// A file in the box (a conversation on the volume) survives a pause.
	code, raw := call(t, "POST", box.URL+"/api/conversations", box.Key, `{"title":"survives"}`)
	if code != 201 {
		t.Fatalf("create conversation: %d %s", code, raw)
	}
	var conv struct{ ID string }
	json.Unmarshal(raw, &conv)

	paused, err := f.p.Suspend(ctx, f.acct, box.ID)
	if err != nil {
		t.Fatal(err)
	}
	if paused.State != core.StatePaused || paused.ID != box.ID || paused.URL != "" || paused.PausedAt.IsZero() ||
		paused.PausedAt.Before(before) || !paused.LastActivityAt.IsZero() || paused.Key != box.Key {
		t.Errorf("suspended box: %+v", paused)
	}
	if paused.Size == nil || paused.Size.Bytes <= 0 {
		t.Errorf("suspended box size: %+v", paused.Size)
	}
	// Suspending a paused box succeeds and changes nothing.
	again, err := f.p.Suspend(ctx, f.acct, box.ID)
	if err != nil || again.State != core.StatePaused || !again.PausedAt.Equal(paused.PausedAt) {
		t.Errorf("second suspend: %+v %v", again, err)
	}
	listed, err := f.p.List(ctx, f.acct)
	if err != nil || len(listed) != 1 || listed[0].State != core.StatePaused || !listed[0].PausedAt.Equal(paused.PausedAt) {
		t.Errorf("list while paused: %+v %v", listed, err)
	}

	resumed, err := f.p.Resume(ctx, f.acct, box.ID)
	if err != nil {
		t.Fatal(err)
	}
	if resumed.State != core.StateRunning || resumed.ID != box.ID || resumed.Key != box.Key || resumed.URL == "" || !resumed.PausedAt.IsZero() {
		t.Errorf("resumed box: %+v", resumed)
	}
	f.waitActivity(box.ID)
	if code, raw := call(t, "GET", resumed.URL+"/api/conversations/"+conv.ID, resumed.Key, ""); code != 200 {
		t.Errorf("conversation lost over suspend/resume: %d %s", code, raw)
	}
	if again, err := f.p.Resume(ctx, f.acct, box.ID); err != nil || again.State != core.StateRunning || again.URL != resumed.URL {
		t.Errorf("resume of a running box: %+v %v", again, err)
	}

	ins, err := f.cli.ContainerInspect(ctx, box.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var volume string
	for _, m := range ins.Container.Mounts {
		if m.Destination == "/workspace" {
			volume = m.Name
		}
	}
	if volume == "" {
		t.Fatalf("no volume at /workspace: %+v", ins.Container.Mounts)
	}
	vol, err := f.cli.VolumeInspect(ctx, volume, client.VolumeInspectOptions{})
	if err != nil || vol.Volume.Labels[docker.LabelScope] != f.scope || vol.Volume.Labels[core.LabelWorkspace] != "ws_life" {
		t.Errorf("volume labels: %+v %v", vol.Volume.Labels, err)
	}

	if err := f.p.Delete(ctx, f.acct, box.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cli.ContainerInspect(ctx, box.ID, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("container still there after delete: %v", err)
	}
	if _, err := f.cli.VolumeInspect(ctx, volume, client.VolumeInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("volume still there after delete: %v", err)
	}
	_, err = f.p.Get(ctx, f.acct, box.ID)
	wantKind(t, err, core.KindNotFound, "get after delete")
	if err := f.p.Delete(ctx, f.acct, box.ID); err != nil {
		t.Errorf("second delete (of a gone box, which succeeds): %v", err)
	}

	if strings.Contains(f.logs.String(), box.Key) {
		t.Error("the box key appears in the provider's logs")
	}
}

func TestListScopes(t *testing.T) {
	a := newFixture(t, docker.Config{})
	b := newFixture(t, docker.Config{})
	ctx := ctxT(t)
	ba := a.create("ws_scope_a", nil)
	bb := b.create("ws_scope_b", nil)

	for _, tc := range []struct {
		f    *fixture
		mine core.Box
	}{{a, ba}, {b, bb}} {
		boxes, err := tc.f.p.List(ctx, tc.f.acct)
		if err != nil {
			t.Fatal(err)
		}
		if len(boxes) != 1 || boxes[0].ID != tc.mine.ID {
			t.Fatalf("scope %s lists %+v, want only %s", tc.f.scope, boxes, tc.mine.ID)
		}
		got := boxes[0]
		if got.Key != tc.mine.Key || got.URL == "" || got.State != core.StateRunning || got.Size == nil ||
			got.Size.Source != core.SizeDockerEngineUsed || got.Labels[core.LabelWorkspace] != tc.mine.Labels[core.LabelWorkspace] {
			t.Errorf("listed box %+v", got)
		}
	}
	// One scope cannot reach into another's boxes.
	_, err := a.p.Get(ctx, a.acct, bb.ID)
	wantKind(t, err, core.KindNotFound, "get another scope's box")
	// Deleting it is deleting a box this scope does not have: it succeeds
	// and leaves the other scope's box alone.
	if err := a.p.Delete(ctx, a.acct, bb.ID); err != nil {
		t.Errorf("delete another scope's box: %v", err)
	}
	if _, err := b.p.Get(ctx, b.acct, bb.ID); err != nil {
		t.Errorf("the other scope's box must survive: %v", err)
	}
	// A container that is no box at all is not one either.
	_, err = a.p.Get(ctx, a.acct, "no-such-container-"+a.scope)
	wantKind(t, err, core.KindNotFound, "get unknown id")
}

func TestCreateIdempotent(t *testing.T) {
	f := newFixture(t, docker.Config{})
	ctx := ctxT(t)
	first := f.create("ws_twice", nil)
	second := f.create("ws_twice", nil)
	if second.ID != first.ID || second.Key != first.Key {
		t.Errorf("second create made another box: %s vs %s", second.ID, first.ID)
	}
	boxes, err := f.p.List(ctx, f.acct)
	if err != nil || len(boxes) != 1 {
		t.Fatalf("after two creates: %d boxes (%v)", len(boxes), err)
	}

	// A create interrupted after the container was made (never started) is
	// completed by the next one.
	img := boxImage(t)
	made, err := f.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: "companion-ws_half",
		Config: &container.Config{Image: img, Env: []string{"OH_SESSION_API_KEYS_0=half-key"}, Labels: map[string]string{
			docker.LabelBox: "1", docker.LabelScope: f.scope, core.LabelWorkspace: "ws_half",
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	half, err := f.p.Get(ctx, f.acct, made.ID)
	if err != nil || half.State != core.StatePaused || !half.PausedAt.IsZero() {
		t.Errorf("never-started box: %+v %v (want paused, no paused_at)", half, err)
	}
	done := f.create("ws_half", nil)
	if done.ID != made.ID || done.State != core.StateRunning || done.Key != "half-key" {
		t.Errorf("completed create: %+v", done)
	}

	// A name taken by something else is a conflict.
	other := dockertest.Scope(t)
	if _, err := f.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:   "companion-ws_taken-" + other,
		Config: &container.Config{Image: img, Labels: map[string]string{docker.LabelBox: "1", docker.LabelScope: other}},
	}); err != nil {
		t.Fatal(err)
	}
	_, err = f.p.Create(ctx, f.acct, core.CreateSpec{WorkspaceID: "ws_taken-" + other})
	wantKind(t, err, core.KindConflict, "create over another scope's container")
}

func TestCreateBadInput(t *testing.T) {
	f := newFixture(t, docker.Config{})
	ctx := ctxT(t)
	_, err := f.p.Create(ctx, f.acct, core.CreateSpec{WorkspaceID: "ws_noimg", Options: map[string]string{"image": "127.0.0.1:1/companion-missing:does-not-exist"}})
	wantKind(t, err, core.KindInvalid, "missing image")
	if !strings.Contains(err.Error(), "options.image: Docker image 127.0.0.1:1/companion-missing:does-not-exist") || !strings.Contains(err.Error(), "could not be pulled") {
		t.Errorf("missing image message: %v", err)
	}
	_, err = f.p.Create(ctx, f.acct, core.CreateSpec{WorkspaceID: "ws_opt", Options: map[string]string{"region": "x"}})
	wantKind(t, err, core.KindInvalid, "unknown option")
	_, err = f.p.Create(ctx, f.acct, core.CreateSpec{WorkspaceID: "../etc"})
	wantKind(t, err, core.KindInvalid, "bad workspace id")
	if boxes, err := f.p.List(ctx, f.acct); err != nil || len(boxes) != 0 {
		t.Errorf("failed creates left boxes: %+v %v", boxes, err)
	}
}

func TestRemovedBehindBack(t *testing.T) {
	f := newFixture(t, docker.Config{})
	ctx := ctxT(t)
	box := f.create("ws_gone", nil)
	if _, err := f.cli.ContainerRemove(ctx, box.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
		t.Fatal(err)
	}
	_, err := f.p.Get(ctx, f.acct, box.ID)
	wantKind(t, err, core.KindNotFound, "get")
	_, err = f.p.Suspend(ctx, f.acct, box.ID)
	wantKind(t, err, core.KindNotFound, "suspend")
	_, err = f.p.Resume(ctx, f.acct, box.ID)
	wantKind(t, err, core.KindNotFound, "resume")
	if err := f.p.Delete(ctx, f.acct, box.ID); err != nil {
		t.Errorf("delete of a box removed outside companion: %v", err)
	}
	if boxes, err := f.p.List(ctx, f.acct); err != nil || len(boxes) != 0 {
		t.Errorf("list after removal: %+v %v", boxes, err)
	}
}

func TestFrozenBox(t *testing.T) {
	f := newFixture(t, docker.Config{})
	ctx := ctxT(t)
	box := f.create("ws_frozen", nil)
	if _, err := f.cli.ContainerPause(ctx, box.ID, client.ContainerPauseOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := f.p.Get(ctx, f.acct, box.ID)
	if err != nil || got.State != core.StatePaused || got.URL != "" {
		t.Fatalf("frozen box: %+v %v", got, err)
	}
	got, err = f.p.Resume(ctx, f.acct, box.ID)
	if err != nil || got.State != core.StateRunning {
		t.Fatalf("resume of a frozen box: %+v %v", got, err)
	}
	if _, err := f.cli.ContainerPause(ctx, box.ID, client.ContainerPauseOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err = f.p.Suspend(ctx, f.acct, box.ID)
	if err != nil || got.State != core.StatePaused {
		t.Fatalf("suspend of a frozen box: %+v %v", got, err)
	}
	ins, err := f.cli.ContainerInspect(ctx, box.ID, client.ContainerInspectOptions{})
	if err != nil || ins.Container.State.Status != container.StateExited {
		t.Errorf("suspend of a frozen box must stop it: %v %v", ins.Container.State, err)
	}
}

// TestDeleteSlowBox: an agent-server that ignores SIGTERM is killed after
// StopTimeout, and the delete completes.
func TestDeleteSlowBox(t *testing.T) {
	slow := dockertest.BoxImageEnv(t, map[string]string{"EMULATOR_STOP_GRACE_SECONDS": "60"})
	f := newFixture(t, docker.Config{StopTimeout: time.Second})
	ctx := ctxT(t)
	box := f.create("ws_slow", map[string]string{docker.OptionImage: slow})
	if err := f.p.Delete(ctx, f.acct, box.ID); err != nil {
		t.Fatal(err)
	}
	_, err := f.p.Get(ctx, f.acct, box.ID)
	wantKind(t, err, core.KindNotFound, "get after delete")
}

func TestUnreachableEngine(t *testing.T) {
	for _, host := range []string{"unix:///nonexistent.sock", "tcp://127.0.0.1:1"} {
		t.Run(host, func(t *testing.T) {
			p, err := docker.New(docker.Config{Image: "img", Host: host, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatalf("New must not fail on an unreachable engine: %v", err)
			}
			defer p.Close()
			ctx := ctxT(t)
			want := "Docker Engine is not reachable at " + host + ": start Docker or set DOCKER_HOST"
			check := func(what string, err error) {
				t.Helper()
				wantKind(t, err, core.KindUnavailable, what)
				if err.Error() != want {
					t.Errorf("%s: message %q, want %q", what, err.Error(), want)
				}
			}
			check("ping", p.Ping(ctx))
			_, err = p.List(ctx, core.Account{})
			check("list", err)
			_, err = p.Get(ctx, core.Account{}, "x")
			check("get", err)
			_, err = p.Create(ctx, core.Account{}, core.CreateSpec{WorkspaceID: "ws_x"})
			check("create", err)
			check("delete", p.Delete(ctx, core.Account{}, "x"))
			info, err := p.Describe(ctx)
			if err != nil || info.Name != "docker" || info.Kind != "builtin" {
				t.Errorf("describe: %+v %v", info, err)
			}
		})
	}
	t.Run("malformed host", func(t *testing.T) {
		p, err := docker.New(docker.Config{Image: "img", Host: "not a host", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		err = p.Ping(ctxT(t))
		wantKind(t, err, core.KindUnavailable, "ping")
		if !strings.Contains(err.Error(), "not a host") || !strings.Contains(err.Error(), "DOCKER_HOST") {
			t.Errorf("message: %v", err)
		}
	})
	p, err := docker.New(docker.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if info, _ := p.Describe(context.Background()); !strings.Contains(info.Description, docker.DefaultImage) {
		t.Errorf("without an image the default is not %s: %q", docker.DefaultImage, info.Description)
	}
}

func TestDescribe(t *testing.T) {
	p, err := docker.New(docker.Config{Image: "img", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	info, err := p.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Every setting and option carries the help the page shows.
	if missing := info.UndescribedFields(); len(missing) != 0 || len(info.Options) == 0 {
		t.Errorf("fields without help: %v (options %+v)", missing, info.Options)
	}
	want := core.Capabilities{List: true, LastActivity: true, Suspend: true, SuspendKeepsFiles: true, ResumeSameIdentity: true, Delete: true}
	// Docker deletes nothing on its own: no deletion clocks.
	if info.Capabilities != want || info.Name != "docker" || info.Kind != "builtin" || len(info.Credentials) != 0 || len(info.Config) != 0 || len(info.Clocks) != 0 {
		t.Errorf("describe: %+v", info)
	}
	b, _ := json.Marshal(info)
	if !bytes.Contains(b, []byte(`"credentials":[]`)) || !bytes.Contains(b, []byte(`"config":[]`)) || !bytes.Contains(b, []byte(`"clocks":[]`)) {
		t.Errorf("credentials, config and clocks must serialize as empty lists: %s", b)
	}
}

func TestPingReal(t *testing.T) {
	f := newFixture(t, docker.Config{})
	if err := f.p.Ping(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentLists: many Lists at once, from two providers, all get
// sizes. Engines before API 1.42 refuse a second /system/df while one runs;
// the provider shares one call among its callers and retries when another
// program holds the engine's.
func TestConcurrentLists(t *testing.T) {
	a := newFixture(t, docker.Config{})
	b := newFixture(t, docker.Config{})
	a.create("ws_conc_a", nil)
	b.create("ws_conc_b", nil)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for i := range 12 {
		f := a
		if i%2 == 1 {
			f = b
		}
		wg.Go(func() {
			boxes, err := f.p.List(ctx, f.acct)
			switch {
			case err != nil:
				errs <- err
			case len(boxes) != 1:
				errs <- fmt.Errorf("scope %s: %d boxes", f.scope, len(boxes))
			case boxes[0].Size == nil:
				errs <- fmt.Errorf("scope %s: no size", f.scope)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
