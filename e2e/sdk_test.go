package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

const (
	sdkPath      = "github.com/canvasapp/companion/providers/wasm/sdk"
	boxyardToken = "byd-e2e-7c2e90f1a4"
)

// TestThirdPartyModuleFromSDK is a provider author's whole path, outside
// this repository: the example adapter copied into a temp dir with its own
// go.mod requiring the SDK module (a replace to the local SDK stands in
// for the published version, and GOPROXY=off proves nothing else is
// fetched), a wasip1 reactor build, `companion providers pack` and
// `providers install` with the built binary, then an account and
// create/list/pause/resume/delete through companion desktop's HTTP API
// against the made-up provider's API served on loopback.
func TestThirdPartyModuleFromSDK(t *testing.T) {
	repo := repoRoot(t)
	files := map[string][]byte{}
	for _, f := range []string{"main.go", "manifest.json"} {
		b, err := os.ReadFile(filepath.Join(repo, "providers/wasm/examples/boxyard", f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = b
	}
	module := buildAsAuthor(t, repo, "example.com/boxyard", files)

	data := t.TempDir()
	install := exec.Command(companionBin, "providers", "install", "--yes", "--data-dir", data, module)
	if out, err := install.CombinedOutput(); err != nil || !strings.Contains(string(out), "Installed boxyard") {
		t.Fatalf("install: %v\n%s", err, out)
	}

	api := newBoxyard(boxyardToken)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	apiURL := srv.URL + "/v1"

	p := start(t, options{dataDir: data, args: []string{"--docker-scope", "unused"}})
	s := p.dial(-1)
	s.next(10 * time.Second)
	testsupport.Poll(t, time.Minute, func() error {
		var provs providerList
		p.must(200, "GET", "/v1/providers", nil, &provs)
		if provs.available("boxyard") {
			return nil
		}
		return fmt.Errorf("boxyard not available: %+v", provs)
	})

	// The inspect answer states the limits in the API's units.
	bin, err := os.ReadFile(module)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", p.ready.URL+"/v1/providers/inspect", bytes.NewReader(bin))
	req.Header.Set("Content-Type", "application/wasm")
	req.Header.Set("Authorization", "Bearer "+p.ready.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var inspected struct {
		Module map[string]any `json:"module"`
	}
	err = json.NewDecoder(resp.Body).Decode(&inspected)
	resp.Body.Close()
	lim, _ := inspected.Module["limits"].(map[string]any)
	if err != nil || resp.StatusCode != 200 || lim["call_timeout_seconds"] != 10.0 || lim["memory_mib"] != 32.0 || lim["call_timeout"] != nil {
		t.Fatalf("inspect: %d %v, limits %v; want call_timeout_seconds 10 and memory_mib 32 from the manifest", resp.StatusCode, err, lim)
	}
	// Every field of the answer is documented in API.md's table.
	apiDoc, err := os.ReadFile(filepath.Join(repo, "ui-bridge/API.md"))
	if err != nil {
		t.Fatal(err)
	}
	for k := range inspected.Module {
		if !bytes.Contains(apiDoc, []byte("`"+k+"`")) && !bytes.Contains(apiDoc, []byte("`"+k+".")) {
			t.Errorf("inspect answer field %q is not in ui-bridge/API.md", k)
		}
	}
	for k := range lim {
		if !bytes.Contains(apiDoc, []byte("`limits."+k+"`")) {
			t.Errorf("inspect answer field limits.%s is not in ui-bridge/API.md", k)
		}
	}

	var e apiError
	p.must(502, "POST", "/v1/accounts", map[string]any{
		"provider": "boxyard", "label": "wrong", "config": map[string]string{"api_url": apiURL},
		"credentials": map[string]string{"token": "not-the-token"},
	}, &e)
	if e.Error.Code != "provider_unauthorized" {
		t.Fatalf("wrong token: %+v", e)
	}
	var acct struct {
		Account struct{ ID string } `json:"account"`
	}
	p.must(201, "POST", "/v1/accounts", map[string]any{
		"provider": "boxyard", "label": "Boxyard", "config": map[string]string{"api_url": apiURL},
		"credentials": map[string]string{"token": boxyardToken},
	}, &acct)

	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{
		"account_id": acct.Account.ID, "name": "from-the-sdk",
		"lifecycle": map[string]int{"idle_pause_after_seconds": 900},
	}, &created)
	id := created.Workspace.ID
	w := s.waitFor("running", time.Minute, upsertOf(id, "running")).Workspace
	b, ok := api.get(w.BoxID)
	if !ok || b.Name != "from-the-sdk" || b.Labels["companion.workspace"] != id || b.IdleTimeoutSeconds != 900 {
		t.Fatalf("box at the provider: %+v (found %v), want name, workspace label and idle timeout", b, ok)
	}

	var list struct{ Workspaces []workspace }
	p.must(200, "GET", "/v1/workspaces", nil, &list)
	if len(list.Workspaces) != 1 || list.Workspaces[0].ID != id || list.Workspaces[0].Provider != "boxyard" {
		t.Fatalf("workspaces: %+v", list.Workspaces)
	}

	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	if paused := s.waitFor("paused", time.Minute, upsertOf(id, "paused")); paused.Workspace.PausedAt == nil {
		t.Fatalf("paused without paused_at: %s", paused.Raw)
	}
	if b, _ := api.get(w.BoxID); b.Status != "stopped" {
		t.Fatalf("box is %q at the provider after pause", b.Status)
	}
	p.must(202, "POST", "/v1/workspaces/"+id+"/resume", nil, nil)
	s.waitFor("running again", time.Minute, upsertOf(id, "running"))
	if b, _ := api.get(w.BoxID); b.Status != "running" {
		t.Fatalf("box is %q at the provider after resume", b.Status)
	}

	// The module's boxes run no agent-server: delete without an export.
	p.must(200, "PATCH", "/v1/accounts/"+acct.Account.ID, map[string]string{"delete_export": "best_effort"}, nil)
	p.deleteConfirmed(id)
	s.waitFor("remove", time.Minute, func(m wsMsg) bool { return m.Type == "remove" && m.ID == id })
	if _, ok := api.get(w.BoxID); ok {
		t.Fatalf("box %s still exists at the provider after delete", w.BoxID)
	}

	p.stop()
	if strings.Contains(p.stderr.String(), boxyardToken) || strings.Contains(s.seen.String(), boxyardToken) {
		t.Fatal("the token reached companion's logs or the stream")
	}
}

// TestABIQuickStart builds, packs and inspects the module of ABI.md §0,
// taken from the document itself, as its reader would, so the quick start
// cannot drift from what the SDK and companion accept. It also checks the
// two packers ABI.md offers write the same bytes, and that a manifest
// mistake is named and leaves no output.
func TestABIQuickStart(t *testing.T) {
	repo := repoRoot(t)
	doc, err := os.ReadFile(filepath.Join(repo, "providers/wasm/ABI.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range []string{"main.go", "manifest.json"} {
		_, rest, ok := bytes.Cut(doc, []byte("<!-- quickstart:"+f+" -->\n```"))
		_, rest, _ = bytes.Cut(rest, []byte("\n"))
		block, _, closed := bytes.Cut(rest, []byte("\n```\n"))
		if !ok || !closed {
			t.Fatalf("ABI.md has no quickstart block for %s", f)
		}
		files[f] = block
	}
	module := buildAsAuthor(t, repo, "example.com/acme", files)
	out, err := exec.Command(companionBin, "providers", "inspect", module).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "acme 0.1.0") || !strings.Contains(string(out), "https://api.acme.example:443") {
		t.Fatalf("inspect of the quick-start module: %v\n%s", err, out)
	}

	// The SDK module's own packer writes the same bytes as companion's.
	dir := filepath.Dir(module)
	wasmpack := filepath.Join(t.TempDir(), "wasmpack")
	build := exec.Command("go", "build", "-o", wasmpack, "./cmd/wasmpack")
	build.Dir, build.Env = filepath.Join(repo, "providers/wasm/sdk"), append(os.Environ(), "GOWORK=off", "GOPROXY=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building wasmpack in the SDK module alone: %v\n%s", err, out)
	}
	other := filepath.Join(dir, "wasmpack.wasm")
	if out, err := exec.Command(wasmpack, "-manifest", filepath.Join(dir, "manifest.json"), "-o", other, filepath.Join(dir, "raw.wasm")).CombinedOutput(); err != nil {
		t.Fatalf("wasmpack: %v\n%s", err, out)
	}
	a, _ := os.ReadFile(module)
	b, _ := os.ReadFile(other)
	if !bytes.Equal(a, b) {
		t.Fatal("companion providers pack and wasmpack wrote different modules")
	}

	// A manifest mistake is named, and nothing is written (flags may
	// follow the input file).
	bad := filepath.Join(dir, "bad.json")
	badJSON := bytes.Replace(files["manifest.json"], []byte(`"https://api.acme.example/v2"`), []byte(`"http://api.acme.example/v2"`), 1)
	if err := os.WriteFile(bad, badJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	badOut := filepath.Join(dir, "bad.wasm")
	out, err = exec.Command(companionBin, "providers", "pack", filepath.Join(dir, "raw.wasm"), "--manifest", bad, "-o", badOut).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "upstreams.api.base_url: must be an https:// URL") {
		t.Fatalf("pack with an http base_url: %v\n%s", err, out)
	}
	if _, err := os.Stat(badOut); !os.IsNotExist(err) {
		t.Fatalf("a refused pack wrote %s: %v", badOut, err)
	}

	// Deletion clocks (ABI.md §14): inspect says a module has none, or
	// each it declares in words; pack names a bad one.
	if !strings.Contains(string(inspectOut(t, module)), "Deletion clocks: none") {
		t.Fatalf("inspect does not say the quick-start module has no deletion clocks:\n%s", inspectOut(t, module))
	}
	withClock := func(clock string) []byte {
		return bytes.Replace(files["manifest.json"], []byte(`"capabilities": {"list": true}`),
			[]byte(`"capabilities": {"list": true}, "clocks": [`+clock+`]`), 1)
	}
	clocked, clockedOut := filepath.Join(dir, "clocked.json"), filepath.Join(dir, "clocked.wasm")
	if err := os.WriteFile(clocked, withClock(`{"name": "paused_reaper", "starts": "paused", "after_seconds": 86400, "loses": "box", "note": "Acme deletes boxes stopped a day"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(companionBin, "providers", "pack", "--manifest", clocked, "-o", clockedOut, filepath.Join(dir, "raw.wasm")).CombinedOutput(); err != nil {
		t.Fatalf("pack with a clock: %v\n%s", err, out)
	}
	if s := string(inspectOut(t, clockedOut)); !strings.Contains(s, "paused_reaper: deletes the box 1 day after it stops") || !strings.Contains(s, "Acme deletes boxes stopped a day") {
		t.Fatalf("inspect does not show the module's clock:\n%s", s)
	}
	if err := os.WriteFile(clocked, withClock(`{"name": "reaper", "starts": "stopped", "loses": "box"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(companionBin, "providers", "pack", "--manifest", clocked, "-o", badOut, filepath.Join(dir, "raw.wasm")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), `clocks[0].starts: must be "paused"`) {
		t.Fatalf("pack with a bad clock: %v\n%s", err, out)
	}
}

// inspectOut is what companion providers inspect prints for module.
func inspectOut(t *testing.T, module string) []byte {
	t.Helper()
	out, err := exec.Command(companionBin, "providers", "inspect", module).CombinedOutput()
	if err != nil {
		t.Fatalf("inspect %s: %v\n%s", module, err, out)
	}
	return out
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(root))
}

// buildAsAuthor writes files into a temp dir outside the repository and
// follows ABI.md §0 there: a go.mod of its own requiring only the SDK
// module (a replace to the local SDK stands in for the published version;
// GOPROXY=off proves nothing else is fetched), a wasip1 reactor build, and
// `companion providers pack` with the built binary. It returns the packed
// module.
func buildAsAuthor(t *testing.T, repo, modPath string, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	if strings.HasPrefix(dir, repo+string(filepath.Separator)) {
		t.Fatalf("temp dir %s is inside the repository", dir)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off")
	run := func(extraEnv []string, name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, append(env, extraEnv...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	run(nil, "go", "mod", "init", modPath)
	run(nil, "go", "mod", "edit", "-replace", sdkPath+"="+filepath.Join(repo, "providers/wasm/sdk"))
	run(nil, "go", "get", sdkPath+"@v0.0.0-00010101000000-000000000000")
	gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	if !bytes.Contains(gomod, []byte("require "+sdkPath)) || bytes.Contains(gomod, []byte("canvasapp/companion ")) {
		t.Fatalf("the author's go.mod should require the SDK module and nothing of the server:\n%s", gomod)
	}
	run([]string{"GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0"}, "go", "build", "-buildmode=c-shared", "-o", "raw.wasm", ".")
	run(nil, companionBin, "providers", "pack", "--manifest", "manifest.json", "-o", "packed.wasm", "raw.wasm")
	return filepath.Join(dir, "packed.wasm")
}

// boxyard serves the made-up API the example adapter speaks
// (providers/wasm/examples/boxyard), in memory, under /v1.
type boxyard struct {
	token string
	mu    sync.Mutex
	boxes map[string]*boxyardBox
	next  int
}

type boxyardBox struct {
	ID                 string            `json:"id"`
	Name               string            `json:"name"`
	Status             string            `json:"status"`
	Labels             map[string]string `json:"labels"`
	CreatedAt          time.Time         `json:"created_at"`
	IdleTimeoutSeconds int64             `json:"idle_timeout_seconds"`
}

func newBoxyard(token string) *boxyard {
	return &boxyard{token: token, boxes: map[string]*boxyardBox{}}
}

func (a *boxyard) get(id string) (boxyardBox, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, ok := a.boxes[id]
	if !ok {
		return boxyardBox{}, false
	}
	return *b, true
}

func (a *boxyard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+a.token {
		http.Error(w, `{"message":"bad token"}`, http.StatusUnauthorized)
		return
	}
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	path, _ := strings.CutPrefix(r.URL.Path, "/v1/boxes")
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	var b *boxyardBox
	if parts[0] != "" {
		if b = a.boxes[parts[0]]; b == nil {
			reply(404, map[string]string{"message": "no such box"})
			return
		}
	}
	switch {
	case r.Method == "GET" && path == "":
		out := []boxyardBox{}
		for _, b := range a.boxes {
			out = append(out, *b)
		}
		reply(200, map[string]any{"boxes": out})
	case r.Method == "POST" && path == "":
		var in boxyardBox
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Name == "" {
			reply(400, map[string]string{"message": "name is required"})
			return
		}
		a.next++
		in.ID, in.Status, in.CreatedAt = fmt.Sprintf("byd-%d", a.next), "running", time.Now().UTC()
		a.boxes[in.ID] = &in
		reply(201, in)
	case r.Method == "GET" && len(parts) == 1:
		reply(200, b)
	case r.Method == "DELETE" && len(parts) == 1:
		delete(a.boxes, b.ID)
		w.WriteHeader(204)
	case r.Method == "POST" && len(parts) == 2 && (parts[1] == "stop" || parts[1] == "start"):
		b.Status = map[string]string{"stop": "stopped", "start": "running"}[parts[1]]
		reply(200, b)
	default:
		reply(404, map[string]string{"message": "no such route"})
	}
}
