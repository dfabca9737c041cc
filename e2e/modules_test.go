package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// buildThirdPartyModule builds the well-behaved test module from source the
// way a provider author would.
func buildThirdPartyModule(t *testing.T) string {
	return buildModule(t, "providers/wasm/testdata/good", "good")
}

// buildModule builds the module in the package at pkg (a path in this
// repository, holding manifest.json) as a provider author would: the Go
// SDK, a wasip1 reactor build, then `companion providers pack` to embed
// its manifest. It returns the path of name.wasm.
func buildModule(t *testing.T, pkg, name string) string {
	t.Helper()
	dir := t.TempDir()
	raw := filepath.Join(dir, "raw.wasm")
	build := exec.Command("go", "build", "-buildmode=c-shared", "-o", raw, "github.com/canvasapp/companion/"+pkg)
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build module %s: %v\n%s", pkg, err, out)
	}
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(strings.TrimSpace(string(root)), pkg, "manifest.json")
	out := filepath.Join(dir, name+".wasm")
	if b, err := exec.Command(companionBin, "providers", "pack", "--manifest", manifest, "-o", out, raw).CombinedOutput(); err != nil {
		t.Fatalf("providers pack: %v\n%s", err, b)
	}
	return out
}

// logs returns companion's JSON log lines so far with msg and every given
// attribute.
func (p *proc) logs(msg string, attrs map[string]string) []map[string]any {
	var found []map[string]any
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != msg {
			continue
		}
		ok := true
		for k, v := range attrs {
			if s, _ := rec[k].(string); s != v {
				ok = false
			}
		}
		if ok {
			found = append(found, rec)
		}
	}
	return found
}

// waitLog waits until companion's stderr has a JSON log line with msg and
// every given attribute.
func (p *proc) waitLog(msg string, attrs map[string]string, timeout time.Duration) map[string]any {
	p.t.Helper()
	var found map[string]any
	testsupport.Poll(p.t, timeout, func() error {
		if recs := p.logs(msg, attrs); len(recs) > 0 {
			found = recs[0]
			return nil
		}
		return fmt.Errorf("no log %q with %v", msg, attrs)
	})
	return found
}

type providerList struct {
	Providers []struct {
		Name      string `json:"name"`
		Kind      string `json:"kind"`
		Available bool   `json:"available"`
		Reason    string `json:"reason"`
	} `json:"providers"`
}

func (l providerList) available(name string) bool {
	for _, p := range l.Providers {
		if p.Name == name {
			return p.Available
		}
	}
	return false
}

// TestInstallModuleFromFile installs a third-party module with the CLI,
// checks that a restart reuses the compiled code, and that a module whose
// bytes changed on disk is refused.
func TestInstallModuleFromFile(t *testing.T) {
	module := buildThirdPartyModule(t)
	data := t.TempDir()

	out, err := exec.Command(companionBin, "providers", "inspect", module).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "api.good.example") || !strings.Contains(string(out), "Bearer") {
		t.Fatalf("inspect does not show hosts and where credentials go: %v\n%s", err, out)
	}
	bin, _ := os.ReadFile(module)
	sum := sha256.Sum256(bin)
	if !strings.Contains(string(out), hex.EncodeToString(sum[:])) {
		t.Fatalf("inspect does not show the SHA-256:\n%s", out)
	}

	refuse := exec.Command(companionBin, "providers", "install", "--data-dir", data, module)
	refuse.Stdin = strings.NewReader("n\n")
	if out, err := refuse.CombinedOutput(); err == nil || !strings.Contains(string(out), "not installed") {
		t.Fatalf("install answered no still installed: %v\n%s", err, out)
	}
	install := exec.Command(companionBin, "providers", "install", "--data-dir", data, module)
	install.Stdin = strings.NewReader("y\n")
	if out, err := install.CombinedOutput(); err != nil || !strings.Contains(string(out), "Installed good") {
		t.Fatalf("install: %v\n%s", err, out)
	}

	// Install compiled the module into the data dir's cache already. A
	// module is compiled when an account first uses it: this one (static
	// mode: its list answers from memory) is listed at every start.
	opts := options{dataDir: data, args: []string{"--docker-scope", "unused"}}
	p := start(t, opts)
	var acct struct {
		Account struct {
			ID string `json:"id"`
		} `json:"account"`
	}
	p.must(201, "POST", "/v1/accounts", map[string]any{"provider": "good", "label": "static", "config": map[string]string{"mode": "static"},
		"credentials": map[string]string{"token": "tok-static", "files_key": "key-static"}}, &acct)
	p.waitLog("provider module ready", map[string]string{"module": "good", "compile_cache": "hit"}, time.Minute)
	var provs providerList
	p.must(200, "GET", "/v1/providers", nil, &provs)
	if !provs.available("good") {
		t.Fatalf("installed module not available: %+v", provs)
	}
	p.stop()

	// Without the cache the module compiles again (in the background),
	// and the next start reuses that work.
	if err := os.RemoveAll(filepath.Join(data, "wasm-cache")); err != nil {
		t.Fatal(err)
	}
	p = start(t, opts)
	p.waitLog("provider module ready", map[string]string{"module": "good", "compile_cache": "miss"}, 2*time.Minute)
	p.stop()
	p = start(t, opts)
	p.waitLog("provider module ready", map[string]string{"module": "good", "compile_cache": "hit"}, time.Minute)
	p.stop()

	// Change one byte of the installed file.
	path := filepath.Join(data, "modules", "good.wasm")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p = start(t, opts)
	var prov2 providerList
	p.must(200, "GET", "/v1/providers", nil, &prov2)
	if prov2.available("good") {
		t.Fatalf("a module whose bytes changed was loaded: %+v", prov2)
	}
	if !strings.Contains(p.stderr.String(), "changed since it was installed") {
		t.Fatalf("no clear refusal in the logs:\n%s", p.stderr.String())
	}
	p.must(204, "DELETE", "/v1/accounts/"+acct.Account.ID, nil, nil) // a module in use cannot be removed
	p.stop()
	out, err = exec.Command(companionBin, "providers", "list", "--data-dir", data).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "changed") {
		t.Fatalf("providers list does not flag the changed module: %v\n%s", err, out)
	}
	if out, err := exec.Command(companionBin, "providers", "remove", "--data-dir", data, "good").CombinedOutput(); err != nil {
		t.Fatalf("remove: %v\n%s", err, out)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("removed module's file still there: %v", err)
	}
}

// TestInstallModuleOverHTTP installs through the gated HTTP routes: inspect
// first, then install confirming the SHA-256 that was shown.
func TestInstallModuleOverHTTP(t *testing.T) {
	module := buildThirdPartyModule(t)
	bin, err := os.ReadFile(module)
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})

	post := func(path string, body []byte, token string) (int, []byte) {
		req, _ := http.NewRequest("POST", p.ready.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/wasm")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.Bytes()
	}
	if code, _ := post("/v1/providers/inspect", bin, ""); code != 401 {
		t.Fatalf("inspect without a token: %d", code)
	}
	code, raw := post("/v1/providers/inspect", bin, p.ready.Token)
	var inspected struct {
		Module struct {
			Name   string   `json:"name"`
			SHA256 string   `json:"sha256"`
			Hosts  []string `json:"hosts"`
		} `json:"module"`
	}
	if code != 200 || json.Unmarshal(raw, &inspected) != nil || inspected.Module.Name != "good" || len(inspected.Module.Hosts) == 0 {
		t.Fatalf("inspect: %d %s", code, raw)
	}
	if code, raw := post("/v1/providers?sha256="+strings.Repeat("0", 64), bin, p.ready.Token); code != 409 {
		t.Fatalf("install confirming another hash: %d %s", code, raw)
	}
	if code, raw := post("/v1/providers?sha256="+inspected.Module.SHA256, []byte("not wasm"), p.ready.Token); code == 201 {
		t.Fatalf("garbage installed: %s", raw)
	}
	if code, raw := post("/v1/providers?sha256="+inspected.Module.SHA256, bin, p.ready.Token); code != 201 {
		t.Fatalf("install: %d %s", code, raw)
	}
	var provs providerList
	p.must(200, "GET", "/v1/providers", nil, &provs)
	if !provs.available("good") {
		t.Fatalf("module installed over HTTP not available: %+v", provs)
	}
	// The list names the installed module's pinned hash and its hosts, as
	// inspect showed them.
	var facts struct {
		Providers []struct {
			Name, SHA256 string
			Hosts        []string
		}
	}
	p.must(200, "GET", "/v1/providers", nil, &facts)
	for _, f := range facts.Providers {
		if f.Name == "good" && (f.SHA256 != inspected.Module.SHA256 || !slices.Equal(f.Hosts, inspected.Module.Hosts)) {
			t.Fatalf("GET /v1/providers shows good as sha256 %q hosts %v, want %q %v", f.SHA256, f.Hosts, inspected.Module.SHA256, inspected.Module.Hosts)
		}
	}
	p.must(204, "DELETE", "/v1/providers/good", nil, nil)
	p.must(404, "DELETE", "/v1/providers/good", nil, nil)
	p.must(400, "DELETE", "/v1/providers/docker", nil, nil)
}
