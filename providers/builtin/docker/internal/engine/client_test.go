package engine

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeEngine is an httptest server answering like a Docker Engine of
// API version apiVersion; it records the paths asked.
type fakeEngine struct {
	apiVersion string
	mu         sync.Mutex
	paths      []string
	pings      int
	handle     func(w http.ResponseWriter, r *http.Request) bool // true: handled
}

func (f *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.paths = append(f.paths, r.Method+" "+r.URL.Path)
	if r.URL.Path == "/_ping" {
		f.pings++
	}
	f.mu.Unlock()
	if f.apiVersion != "" {
		w.Header().Set("Api-Version", f.apiVersion)
	}
	if f.handle != nil && f.handle(w, r) {
		return
	}
	if r.URL.Path == "/_ping" {
		io.WriteString(w, "OK")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	io.WriteString(w, `{"message":"page not found"}`)
}

func (f *fakeEngine) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.paths...)
}

// serve starts f on TCP and returns a client for it, with no DOCKER_*
// variables from the machine.
func serve(t *testing.T, f *fakeEngine) *Client {
	t.Helper()
	s := httptest.NewServer(f)
	t.Cleanup(s.Close)
	clearEnv(t)
	c, err := New("tcp://" + strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func clearEnv(t *testing.T) {
	for _, k := range []string{"DOCKER_HOST", "DOCKER_API_VERSION", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY"} {
		t.Setenv(k, "")
	}
}

func TestNegotiateVersion(t *testing.T) {
	cases := []struct{ server, want, err string }{
		{"1.41", "1.41", ""},
		{"1.45", "1.45", ""},
		{MaxAPIVersion, MaxAPIVersion, ""},
		{"1.60", MaxAPIVersion, ""},
		{"2.0", MaxAPIVersion, ""},
		{"", MaxAPIVersion, ""},
		{"1.40", "", "minimum supported API version is " + MinAPIVersion},
		{"1.24", "", "not supported"},
		{"banana", "", "not a version"},
	}
	for _, tc := range cases {
		got, err := negotiate(tc.server)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !IsInvalid(err) {
				t.Errorf("negotiate(%q) = %q, %v; want invalid error %q", tc.server, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("negotiate(%q) = %q, %v; want %q", tc.server, got, err, tc.want)
		}
	}
}

func TestFirstCallNegotiatesOnce(t *testing.T) {
	f := &fakeEngine{apiVersion: "1.43", handle: func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/v1.43/containers/json" {
			if got := r.URL.Query().Get("filters"); got != `{"label":{"a=1":true,"b=2":true}}` {
				http.Error(w, "filters "+got, 400)
				return true
			}
			io.WriteString(w, `[{"Id":"c1","Names":["/x"]},{"Id":"c2"}]`)
			return true
		}
		return false
	}}
	c := serve(t, f)
	ctx := context.Background()
	for range 3 {
		got, err := c.ContainerList(ctx, true, Filters{"label": {"a=1", "b=2"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID != "c1" || got[1].ID != "c2" {
			t.Fatalf("list = %+v", got)
		}
	}
	if c.Version() != "1.43" {
		t.Errorf("version %q", c.Version())
	}
	if f.pings != 1 {
		t.Errorf("%d pings, want 1: %v", f.pings, f.seen())
	}
}

func TestNewerEngineIsSpokenToAtOurMax(t *testing.T) {
	f := &fakeEngine{apiVersion: "1.99"}
	c := serve(t, f)
	if _, err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.ContainerInspect(context.Background(), "x")
	seen := f.seen()
	if last := seen[len(seen)-1]; last != "GET /v"+MaxAPIVersion+"/containers/x/json" {
		t.Errorf("asked %s", last)
	}
}

func TestOldEngineRefused(t *testing.T) {
	f := &fakeEngine{apiVersion: "1.30"}
	c := serve(t, f)
	_, err := c.ContainerInspect(context.Background(), "x")
	if !IsInvalid(err) || !strings.Contains(err.Error(), "1.30") {
		t.Fatalf("err = %v", err)
	}
	for _, p := range f.seen() {
		if p != "GET /_ping" {
			t.Errorf("called %s on an engine it cannot speak to", p)
		}
	}
	// Not remembered as negotiated: the next call asks again.
	c.ContainerInspect(context.Background(), "x")
	if f.pings != 2 {
		t.Errorf("pings %d, want 2", f.pings)
	}
}

func TestAPIVersionFromEnvSkipsNegotiation(t *testing.T) {
	f := &fakeEngine{apiVersion: "1.45"}
	s := httptest.NewServer(f)
	defer s.Close()
	clearEnv(t)
	t.Setenv("DOCKER_API_VERSION", "1.41")
	t.Setenv("DOCKER_HOST", "tcp://"+strings.TrimPrefix(s.URL, "http://"))
	c, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	c.ContainerInspect(context.Background(), "x")
	if got := f.seen(); len(got) != 1 || got[0] != "GET /v1.41/containers/x/json" {
		t.Errorf("asked %v", got)
	}
	t.Setenv("DOCKER_API_VERSION", "new")
	if _, err := New(""); err == nil {
		t.Error("a malformed DOCKER_API_VERSION must be refused")
	}
}

func TestErrorMapping(t *testing.T) {
	f := &fakeEngine{apiVersion: "1.41", handle: func(w http.ResponseWriter, r *http.Request) bool {
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1.41/containers/"), "/start")
		switch id {
		case "started":
			w.WriteHeader(http.StatusNotModified)
		case "fine":
			w.WriteHeader(http.StatusNoContent)
		case "gone":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			io.WriteString(w, `{"message":"No such container: gone"}`)
		case "taken":
			w.WriteHeader(409)
			io.WriteString(w, `{"message":"Conflict. The container name is already in use"}`)
		case "bad":
			w.WriteHeader(400)
			io.WriteString(w, "plain text reason\n")
		case "down":
			w.WriteHeader(503)
		case "nope":
			w.WriteHeader(403)
			io.WriteString(w, `{"message":"authorization denied by plugin"}`)
		case "boom":
			w.WriteHeader(500)
			io.WriteString(w, `{"message":"driver failed"}`)
		default:
			return false
		}
		return true
	}}
	c := serve(t, f)
	ctx := context.Background()
	for _, id := range []string{"started", "fine"} {
		if err := c.ContainerStart(ctx, id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
	cases := []struct {
		id   string
		is   func(error) bool
		msg  string
		code int
	}{
		{"gone", IsNotFound, "No such container: gone", 404},
		{"taken", IsConflict, "Conflict. The container name is already in use", 409},
		{"bad", IsInvalid, "plain text reason", 400},
		{"down", IsUnavailable, "503", 503},
		{"nope", IsPermission, "authorization denied by plugin", 403},
		{"boom", func(err error) bool { return !IsNotFound(err) && !IsConflict(err) && !IsConnectionFailed(err) }, "driver failed", 500},
	}
	for _, tc := range cases {
		err := c.ContainerStart(ctx, tc.id)
		var e *Error
		if !errors.As(err, &e) || e.StatusCode != tc.code || !tc.is(err) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v (%#v)", tc.id, err, e)
		}
	}
}

func TestUnreachableIsConnectionFailed(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	c, err := New("unix://" + filepath.Join(dir, "none.sock"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Ping(context.Background())
	if !IsConnectionFailed(err) || IsNotFound(err) || !strings.Contains(err.Error(), "none.sock") {
		t.Errorf("missing socket: %v", err)
	}
	// A closed port on loopback.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	c, _ = New("tcp://" + addr)
	if _, err := c.ContainerInspect(context.Background(), "x"); !IsConnectionFailed(err) {
		t.Errorf("closed port: %v", err)
	}
	// A canceled call is no connection failure.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Ping(ctx); IsConnectionFailed(err) || !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}

func TestHostParsing(t *testing.T) {
	clearEnv(t)
	for _, bad := range []string{"docker.sock", "unix://", "ssh://me@host", "npipe:////./pipe/docker_engine", "tcp://"} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
	c, err := New("")
	if err != nil || c.Host() != DefaultHost {
		t.Errorf("default host: %v %v", c, err)
	}
	t.Setenv("DOCKER_HOST", "tcp://10.0.0.1:2375/base/")
	c, err = New("")
	if err != nil || c.Host() != "tcp://10.0.0.1:2375/base/" || c.base != "http://10.0.0.1:2375/base" {
		t.Errorf("DOCKER_HOST tcp: %+v %v", c, err)
	}
	// The argument wins over DOCKER_HOST.
	c, err = New("unix:///run/other.sock")
	if err != nil || c.Host() != "unix:///run/other.sock" {
		t.Errorf("explicit host: %v", err)
	}
}

// TestUnixSocket serves the fake engine on a unix socket, as the real one
// is usually reached.
func TestUnixSocket(t *testing.T) {
	clearEnv(t)
	sock := filepath.Join(t.TempDir(), "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeEngine{apiVersion: "1.41", handle: func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/v1.41/containers/abc/json" {
			io.WriteString(w, `{"Id":"abc","Name":"/n","State":{"Status":"running","Running":true,"ExitCode":0},
				"Config":{"Cmd":"/bin/sh","Entrypoint":null,"Labels":{"k":"v"},"ExposedPorts":{"8000/tcp":{}}},
				"NetworkSettings":{"Ports":{"8000/tcp":[{"HostIp":"127.0.0.1","HostPort":"32768"}]}},
				"Mounts":[{"Type":"volume","Name":"v1","Destination":"/workspace","RW":true}]}`)
			return true
		}
		return false
	}}
	s := &http.Server{Handler: f}
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	c, err := New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := c.ContainerInspect(context.Background(), "abc")
	if err != nil {
		t.Fatal(err)
	}
	if ins.ID != "abc" || ins.State.Status != StateRunning || len(ins.Config.Cmd) != 1 || ins.Config.Cmd[0] != "/bin/sh" ||
		ins.NetworkSettings.Ports["8000/tcp"][0].HostPort != "32768" || ins.Mounts[0].Name != "v1" || !ins.Mounts[0].RW {
		t.Errorf("inspect = %+v", ins)
	}
}

func TestCreateBody(t *testing.T) {
	var got map[string]any
	f := &fakeEngine{apiVersion: "1.41", handle: func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/v1.41/containers/create" {
			return false
		}
		if r.URL.Query().Get("name") != "companion-ws" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad query", 400)
			return true
		}
		json.NewDecoder(r.Body).Decode(&got)
		w.WriteHeader(201)
		io.WriteString(w, `{"Id":"new1","Warnings":[]}`)
		return true
	}}
	c := serve(t, f)
	id, err := c.ContainerCreate(context.Background(), "companion-ws",
		&Config{Image: "img", Env: []string{"A=1"}, Labels: map[string]string{"l": "1"}, ExposedPorts: map[string]struct{}{"8000/tcp": {}}},
		&HostConfig{PortBindings: map[string][]PortBinding{"8000/tcp": {{HostIP: "127.0.0.1"}}},
			Mounts: []Mount{{Type: MountVolume, Target: "/workspace", VolumeOptions: &VolumeOptions{Labels: map[string]string{"l": "1"}}}}})
	if err != nil || id != "new1" {
		t.Fatalf("create = %q, %v", id, err)
	}
	b, _ := json.Marshal(got)
	want := `{"Env":["A=1"],"ExposedPorts":{"8000/tcp":{}},"HostConfig":{"Mounts":[{"Target":"/workspace","Type":"volume","VolumeOptions":{"Labels":{"l":"1"}}}],"PortBindings":{"8000/tcp":[{"HostIp":"127.0.0.1","HostPort":""}]}},"Image":"img","Labels":{"l":"1"}}`
	if string(b) != want {
		t.Errorf("body\n got %s\nwant %s", b, want)
	}
}

func TestPullStream(t *testing.T) {
	var query string
	f := &fakeEngine{apiVersion: "1.41", handle: func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/v1.41/images/create" {
			return false
		}
		query = r.URL.RawQuery
		io.WriteString(w, `{"status":"Pulling from library/x","id":"1"}
{"status":"Downloading","id":"l1","progressDetail":{"current":5,"total":10},"progress":"[==>  ]"}
{"errorDetail":{"message":"manifest unknown"},"error":"manifest unknown"}
`)
		return true
	}}
	c := serve(t, f)
	r, err := c.ImagePull(context.Background(), "reg.example:5000/team/x")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if query != "fromImage=reg.example%3A5000%2Fteam%2Fx&tag=latest" {
		t.Errorf("query %s", query)
	}
	var msgs []PullMessage
	err = DecodePull(r, func(m PullMessage) error { msgs = append(msgs, m); return nil })
	if len(msgs) != 2 || msgs[1].ProgressDetail == nil || msgs[1].ProgressDetail.Total != 10 {
		t.Errorf("messages %+v", msgs)
	}
	if err == nil || err.Error() != "manifest unknown" {
		t.Errorf("stream error %v", err)
	}
}

func TestSplitRef(t *testing.T) {
	for ref, want := range map[string][2]string{
		"alpine":                     {"alpine", "latest"},
		"alpine:3.20":                {"alpine", "3.20"},
		"localhost:5000/a/b":         {"localhost:5000/a/b", "latest"},
		"localhost:5000/a/b:v1":      {"localhost:5000/a/b", "v1"},
		"ghcr.io/x/y@sha256:abcd":    {"ghcr.io/x/y", "sha256:abcd"},
		"ghcr.io/x/y:tag@sha256:abc": {"ghcr.io/x/y:tag", "sha256:abc"},
	} {
		if n, tg := splitRef(ref); n != want[0] || tg != want[1] {
			t.Errorf("splitRef(%q) = %q, %q", ref, n, tg)
		}
	}
}

func TestDiskUsageShapes(t *testing.T) {
	for v, body := range map[string]string{
		"1.41": `{"LayersSize":1,"Containers":[{"Id":"c1","SizeRw":100}],"Volumes":[{"Name":"v1","UsageData":{"Size":23,"RefCount":1}},{"Name":"v2","UsageData":{"Size":-1}}]}`,
		"1.52": `{"ContainerUsage":{"TotalCount":1,"Items":[{"Id":"c1","SizeRw":100}]},"VolumeUsage":{"Items":[{"Name":"v1","UsageData":{"Size":23}},{"Name":"v2","UsageData":{"Size":-1}}]}}`,
	} {
		f := &fakeEngine{apiVersion: v, handle: func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != "/v"+v+"/system/df" {
				return false
			}
			if q := r.URL.Query(); strings.Join(q["type"], ",") != "container,volume" || q.Get("verbose") != "1" {
				http.Error(w, "query "+r.URL.RawQuery, 400)
				return true
			}
			io.WriteString(w, body)
			return true
		}}
		c := serve(t, f)
		du, err := c.DiskUsage(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if len(du.Containers) != 1 || du.Containers[0].SizeRw != 100 || len(du.Volumes) != 2 ||
			du.Volumes[0].UsageData.Size != 23 || du.Volumes[1].UsageData.Size != -1 {
			t.Errorf("%s: %+v", v, du)
		}
	}
}

func TestEventsReadsToTheEnd(t *testing.T) {
	f := &fakeEngine{apiVersion: "1.41", handle: func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/v1.41/events" {
			return false
		}
		q := r.URL.Query()
		if q.Get("since") != "10.000000000" || q.Get("until") != "20.000000000" ||
			q.Get("filters") != `{"container":{"c1":true},"event":{"die":true,"stop":true},"type":{"container":true}}` {
			http.Error(w, "query "+r.URL.RawQuery, 400)
			return true
		}
		io.WriteString(w, `{"Type":"container","Action":"die","Actor":{"ID":"c1"}}`+"\n")
		w.(http.Flusher).Flush()
		io.WriteString(w, `{"Type":"container","Action":"stop","Actor":{"ID":"c1"}}`+"\n")
		return true
	}}
	c := serve(t, f)
	evs, err := c.Events(context.Background(), "10.000000000", "20.000000000",
		Filters{"type": {"container"}, "container": {"c1"}, "event": {"die", "stop"}})
	if err != nil || len(evs) != 2 || evs[0].Action != "die" || evs[1].Action != "stop" || evs[1].Actor.ID != "c1" {
		t.Errorf("events %+v, %v", evs, err)
	}
}

func TestArchive(t *testing.T) {
	var put []byte
	f := &fakeEngine{apiVersion: "1.41", handle: func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/v1.41/containers/c1/archive" {
			return false
		}
		q := r.URL.Query()
		switch r.Method {
		case http.MethodGet:
			if q.Get("path") == "/missing" {
				w.WriteHeader(404)
				io.WriteString(w, `{"message":"Could not find the file /missing in container c1"}`)
				return true
			}
			io.WriteString(w, "tar of "+q.Get("path"))
		case http.MethodPut:
			if q.Get("path") != "/dst" || q.Get("copyUIDGID") != "true" || q.Get("noOverwriteDirNonDir") != "true" || r.Header.Get("Content-Type") != "application/x-tar" {
				http.Error(w, "query "+r.URL.RawQuery, 400)
				return true
			}
			put, _ = io.ReadAll(r.Body)
		}
		return true
	}}
	c := serve(t, f)
	ctx := context.Background()
	rc, err := c.CopyFromContainer(ctx, "c1", "/a b")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "tar of /a b" {
		t.Errorf("got %q", b)
	}
	if _, err := c.CopyFromContainer(ctx, "c1", "/missing"); !IsNotFound(err) {
		t.Errorf("missing: %v", err)
	}
	if err := c.CopyToContainer(ctx, "c1", "/dst", strings.NewReader("tarbytes"), true); err != nil || string(put) != "tarbytes" {
		t.Errorf("put: %v %q", err, put)
	}
}

func TestTLSFromEnv(t *testing.T) {
	clearEnv(t)
	if c, err := tlsFromEnv(); c != nil || err != nil {
		t.Errorf("no TLS variables: %v %v", c, err)
	}
	dir := t.TempDir()
	t.Setenv("DOCKER_CERT_PATH", dir)
	c, err := tlsFromEnv()
	if err != nil || c == nil || !c.InsecureSkipVerify {
		t.Errorf("cert path without verify: %+v %v", c, err)
	}
	t.Setenv("DOCKER_TLS_VERIFY", "1")
	c, err = tlsFromEnv()
	if err != nil || c == nil || c.InsecureSkipVerify {
		t.Errorf("verify: %+v %v", c, err)
	}
	os.WriteFile(filepath.Join(dir, "ca.pem"), []byte("not pem"), 0o600)
	if _, err := tlsFromEnv(); err == nil {
		t.Error("a broken ca.pem must be an error")
	}
	cl, err := New("tcp://127.0.0.1:2376")
	if err == nil || cl != nil {
		t.Error("New must report the broken TLS set-up")
	}
}

// TestTLSEngine reaches a TLS engine with the CA from DOCKER_CERT_PATH, and
// fails to without it.
func TestTLSEngine(t *testing.T) {
	f := &fakeEngine{apiVersion: "1.41"}
	s := httptest.NewTLSServer(f)
	defer s.Close()
	clearEnv(t)
	dir := t.TempDir()
	var buf strings.Builder
	pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	os.WriteFile(filepath.Join(dir, "ca.pem"), []byte(buf.String()), 0o600)
	t.Setenv("DOCKER_CERT_PATH", dir)
	t.Setenv("DOCKER_TLS_VERIFY", "1")
	host := "tcp://" + strings.TrimPrefix(s.URL, "https://")
	c, err := New(host)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := c.Ping(context.Background()); err != nil || v != "1.41" {
		t.Fatalf("ping over TLS: %q %v", v, err)
	}
	// Plain HTTP against the TLS port is a connection failure.
	clearEnv(t)
	c, _ = New(host)
	if _, err := c.Ping(context.Background()); err == nil {
		t.Error("plain HTTP to a TLS engine must fail")
	}
}

// TestExec: the command is created with its output attached, started
// attached, read to its end (stdout and stderr frames joined), and its exit
// code comes from inspecting it afterwards.
func TestExec(t *testing.T) {
	frame := func(stream byte, s string) []byte {
		return append([]byte{stream, 0, 0, 0, 0, 0, 0, byte(len(s))}, s...)
	}
	var created map[string]any
	f := &fakeEngine{apiVersion: "1.41", handle: func(w http.ResponseWriter, r *http.Request) bool {
		switch r.Method + " " + r.URL.Path {
		case "POST /v1.41/containers/c1/exec":
			json.NewDecoder(r.Body).Decode(&created)
			w.WriteHeader(201)
			io.WriteString(w, `{"Id":"e1"}`)
		case "POST /v1.41/exec/e1/start":
			w.Header().Set("Content-Type", "application/vnd.docker.raw-stream")
			w.Write(frame(1, "out "))
			w.(http.Flusher).Flush()
			w.Write(frame(2, "err"))
		case "GET /v1.41/exec/e1/json":
			io.WriteString(w, `{"Running":false,"ExitCode":3}`)
		default:
			return false
		}
		return true
	}}
	c := serve(t, f)
	code, out, err := c.Exec(context.Background(), "c1", []string{"rm", "-rf", "--", "/x"})
	if err != nil || code != 3 || out != "out err" {
		t.Fatalf("Exec = %d, %q, %v; want 3, %q", code, out, err, "out err")
	}
	if cmd, _ := created["Cmd"].([]any); len(cmd) != 4 || cmd[3] != "/x" || created["AttachStdout"] != true || created["AttachStderr"] != true {
		t.Fatalf("exec created with %v", created)
	}
}
