package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// The hostile modules are the WAT files of the wasm package's tests,
// assembled with wabt's wat2wasm and packed with the built binary.
const watDir = "../providers/wasm/testdata/wat"

// buildWatModule assembles testdata/wat/NAME.wat (expanding
// {{repeat N "text"}}) and packs it with a manifest: no credentials, so
// accounts need no keyring; memoryMiB as given.
func buildWatModule(t *testing.T, name string, memoryMiB int) string {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join(watDir, name+".wat"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := template.New(name).Funcs(template.FuncMap{"repeat": func(n int, s string) string { return strings.Repeat(s, n) }}).Parse(string(src))
	if err != nil {
		t.Fatal(err)
	}
	var expanded bytes.Buffer
	if err := tmpl.Execute(&expanded, nil); err != nil {
		t.Fatal(err)
	}
	wat, raw := filepath.Join(dir, name+".wat"), filepath.Join(dir, name+".raw.wasm")
	if err := os.WriteFile(wat, expanded.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("wat2wasm", wat, "-o", raw).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm %s (install wabt): %v\n%s", name, err, out)
	}
	mod := strings.ReplaceAll(name, "_", "-")
	manifest, _ := json.Marshal(map[string]any{
		"name": mod, "version": "0.0.1", "abi_version": 1, "description": "hostile test module " + name,
		"upstreams":    map[string]any{"api": map[string]any{"base_url": "https://api.test.example"}},
		"limits":       map[string]any{"memory_mib": memoryMiB, "call_timeout_ms": 5000},
		"capabilities": map[string]any{"list": true},
	})
	mpath, out := filepath.Join(dir, "manifest.json"), filepath.Join(dir, mod+".wasm")
	if err := os.WriteFile(mpath, manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(companionBin, "providers", "pack", "--manifest", mpath, "-o", out, raw).CombinedOutput(); err != nil {
		t.Fatalf("providers pack %s: %v\n%s", name, err, b)
	}
	return out
}

// procStatus reads a field of /proc/PID/status in kB.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// refusedModules make the compiler or the runtime allocate gigabytes if
// they are compiled or instantiated; each must be refused by name first.
var refusedModules = []struct{ name, says string }{
	{"huge_table", "table 0 minimum: 100000000 elements"},
	{"table_max", "table 0 maximum: 10000000 elements"},
	{"many_locals", "3000000 locals, above the limit of 10000 locals"},
	{"big_body", "above the limit of 262144 bytes"},
	{"big_data", "data segments together"},
}

// cliMaxRSS is what companion providers inspect may use at most: the
// module file (at most 32 MiB) and the Go runtime.
const cliMaxRSS = 160 << 10 // kB

// TestHostileModulesInspectCLI runs `companion providers inspect` on each
// hostile module under an address-space limit (prlimit --as) and checks
// that it answers the named limit without crashing, within its budget.
func TestHostileModulesInspectCLI(t *testing.T) {
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Fatal("prlimit (util-linux) is needed")
	}
	for _, c := range refusedModules {
		t.Run(c.name, func(t *testing.T) {
			module := buildWatModule(t, c.name, 2)
			// GNU time reports the peak RSS of companion alone (the
			// test's own, inherited through fork, would be counted
			// otherwise).
			cmd := exec.Command("prlimit", "--as=3221225472", "--", "/usr/bin/time", "-f", "maxrss_kb=%M", companionBin, "providers", "inspect", module)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("inspect accepted %s:\n%s", c.name, out)
			}
			text := string(out)
			if strings.Contains(text, "fatal error") || strings.Contains(text, "out of memory") || strings.Contains(text, "goroutine ") {
				t.Fatalf("inspect crashed:\n%s", text)
			}
			want := "provider module " + strings.ReplaceAll(c.name, "_", "-") + " was refused"
			if !strings.Contains(text, want) || !strings.Contains(text, c.says) {
				t.Fatalf("inspect output does not say %q and %q:\n%s", want, c.says, text)
			}
			i := strings.LastIndex(text, "maxrss_kb=")
			if i < 0 {
				t.Fatalf("no maxrss_kb from /usr/bin/time:\n%s", text)
			}
			rss, err := strconv.ParseInt(strings.TrimSpace(text[i+len("maxrss_kb="):]), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: max RSS %d kB: %s", c.name, rss, strings.TrimSpace(text))
			if rss > cliMaxRSS {
				t.Fatalf("inspect used %d kB, budget %d kB", rss, cliMaxRSS)
			}
		})
	}
}

// postModule sends body as application/wasm to path.
func postModule(t *testing.T, p *proc, path string, body io.Reader) (int, apiErrorNamed, http.Header) {
	t.Helper()
	code, e, hdr, err := sendModule(p, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return code, e, hdr
}

func sendModule(p *proc, path string, body io.Reader) (int, apiErrorNamed, http.Header, error) {
	var e apiErrorNamed
	req, _ := http.NewRequest("POST", p.ready.URL+path, body)
	req.Header.Set("Content-Type", "application/wasm")
	req.Header.Set("Authorization", "Bearer "+p.ready.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, e, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &e)
	e.raw = string(raw)
	return resp.StatusCode, e, resp.Header, nil
}

// apiErrorNamed is the error envelope with the fields a module error adds.
type apiErrorNamed struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Module    string `json:"module"`
		Operation string `json:"operation"`
		Field     string `json:"field"`
	} `json:"error"`
	raw string
}

func sha256File(t *testing.T, path string) (string, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), b
}

// firstPartyReady waits until the first-party modules are listed as
// available: their manifests are read after the ready line (they are
// compiled only when an account uses one, and none does here), so the
// memory baseline is taken after that.
func firstPartyReady(p *proc) {
	p.t.Helper()
	var provs providerList
	p.must(200, "GET", "/v1/providers", nil, &provs)
	for _, m := range []string{"daytona", "e2b", "digitalocean"} {
		if !provs.available(m) {
			p.t.Fatalf("first-party provider %s not available: %+v", m, provs)
		}
	}
}

// countLogs counts companion's JSON log lines with msg and attrs.
func (p *proc) countLogs(msg string, attrs map[string]string) int { return len(p.logs(msg, attrs)) }

// TestHostileModulesOverHTTP drives the hostile modules through the HTTP
// API of a companion running under an address-space limit, and checks
// that it stays up, answers each with a named error, and that its
// resident memory stays within its budget and goes back down when a
// module is removed.
func TestHostileModulesOverHTTP(t *testing.T) {
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
	pid := p.cmd.Process.Pid
	firstPartyReady(p)
	limit := procStatus(t, pid, "VmSize")*1024 + 2<<30
	if out, err := exec.Command("prlimit", "--pid", strconv.Itoa(pid), fmt.Sprintf("--as=%d", limit)).CombinedOutput(); err != nil {
		t.Fatalf("prlimit: %v\n%s", err, out)
	}
	base := procStatus(t, pid, "VmRSS")
	// Two module uploads held at once (32 MiB each), the 64 MiB modules
	// below (two instances each), and room for compiling and the heap.
	const allowance = (2*32 + 2*64 + 96) << 10 // kB
	within := func(step string) {
		t.Helper()
		p.must(200, "GET", "/healthz", nil, nil)
		var provs providerList
		p.must(200, "GET", "/v1/providers", nil, &provs)
		if !provs.available("daytona") {
			t.Fatalf("after %s: first-party providers no longer served: %+v", step, provs)
		}
		if rss := procStatus(t, pid, "VmRSS"); rss > base+allowance {
			t.Fatalf("after %s: RSS %d kB, above the baseline %d kB + budget %d kB", step, rss, base, allowance)
		}
	}

	for _, c := range refusedModules {
		module := buildWatModule(t, c.name, 2)
		sum, bin := sha256File(t, module)
		name := strings.ReplaceAll(c.name, "_", "-")
		for _, path := range []string{"/v1/providers/inspect", "/v1/providers?sha256=" + sum} {
			code, e, _ := postModule(t, p, path, bytes.NewReader(bin))
			if code != 422 || e.Error.Code != "module_rejected" || e.Error.Module != name || !strings.Contains(e.Error.Message, c.says) {
				t.Fatalf("%s %s: %d %s", c.name, path, code, e.raw)
			}
		}
		within(c.name)
	}

	// A describe that contradicts the manifest: inspect runs no code and
	// accepts it; install runs describe and refuses it, naming the field.
	module := buildWatModule(t, "lying_describe", 2)
	sum, bin := sha256File(t, module)
	if code, e, _ := postModule(t, p, "/v1/providers/inspect", bytes.NewReader(bin)); code != 200 {
		t.Fatalf("inspect lying describe: %d %s", code, e.raw)
	}
	code, e, _ := postModule(t, p, "/v1/providers?sha256="+sum, bytes.NewReader(bin))
	if code != 422 || e.Error.Field != "version" || e.Error.Operation != "describe" || !strings.Contains(e.Error.Message, `"6.6.6"`) {
		t.Fatalf("install lying describe: %d %s", code, e.raw)
	}

	// Broken guest allocators are refused at install with the reason.
	for name, says := range map[string]string{"alloc_zero": "companion_alloc(4096) returned 0", "alloc_oob": "outside the module's memory"} {
		sum, bin := sha256File(t, buildWatModule(t, name, 2))
		code, e, _ := postModule(t, p, "/v1/providers?sha256="+sum, bytes.NewReader(bin))
		if code != 422 || e.Error.Operation != "describe" || !strings.Contains(e.Error.Message, says) {
			t.Fatalf("install %s: %d %s", name, code, e.raw)
		}
	}
	var provs providerList
	p.must(200, "GET", "/v1/providers", nil, &provs)
	for _, name := range []string{"lying-describe", "alloc-zero", "alloc-oob", "huge-table"} {
		if provs.available(name) {
			t.Fatalf("refused module %s is available", name)
		}
	}
	within("refused installs")

	// An instance that grows its memory to the maximum on every list (the
	// reconciler lists every second) is discarded after each call: RSS
	// stays within the budget over many calls.
	install := func(name string, mib int) string {
		sum, bin := sha256File(t, buildWatModule(t, name, mib))
		if code, e, _ := postModule(t, p, "/v1/providers?sha256="+sum, bytes.NewReader(bin)); code != 201 {
			t.Fatalf("install %s: %d %s", name, code, e.raw)
		}
		var acct struct {
			Account struct {
				ID string `json:"id"`
			} `json:"account"`
		}
		p.must(201, "POST", "/v1/accounts", map[string]any{"provider": strings.ReplaceAll(name, "_", "-"), "label": name}, &acct)
		return acct.Account.ID
	}
	waitLines := func(module, line string, n int) {
		t.Helper()
		testsupport.Poll(t, 60*time.Second, func() error {
			if p.countLogs("module output", map[string]string{"module": module, "line": line}) >= n {
				return nil
			}
			within(module + " calls")
			return fmt.Errorf("%s did not say %q %d times", module, line, n)
		})
	}
	acct := install("grow_memory", 64)
	waitLines("grow-memory", "grew", 5)
	within("grow-memory calls")
	p.must(204, "DELETE", "/v1/accounts/"+acct, nil, nil)
	p.must(204, "DELETE", "/v1/providers/grow-memory", nil, nil)

	// A module whose pooled instance keeps 30 MiB resident: removing the
	// module gives the memory back to the OS.
	acct = install("hold_memory", 64)
	waitLines("hold-memory", "held", 2)
	held := procStatus(t, pid, "VmRSS")
	within("hold-memory calls")
	p.must(204, "DELETE", "/v1/accounts/"+acct, nil, nil)
	p.must(204, "DELETE", "/v1/providers/hold-memory", nil, nil)
	testsupport.Poll(t, 30*time.Second, func() error {
		rss := procStatus(t, pid, "VmRSS")
		if rss < held-20<<10 {
			t.Logf("RSS: baseline %d kB, holding %d kB, after removal %d kB", base, held, rss)
			return nil
		}
		return fmt.Errorf("memory held after removal: RSS %d kB, was %d kB while the module held 30 MiB", rss, held)
	})
	within("removal")
}

// TestModuleUploadsBounded: a module above the size limit is refused with
// 413 before it is read, and at most two inspections run at once; a third
// waits briefly and gets 503 with Retry-After, without buffering.
func TestModuleUploadsBounded(t *testing.T) {
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
	pid := p.cmd.Process.Pid
	firstPartyReady(p)
	base := procStatus(t, pid, "VmRSS")

	big := bytes.Repeat([]byte{0}, 33<<20)
	if code, e, _ := postModule(t, p, "/v1/providers/inspect", bytes.NewReader(big)); code != 413 || e.Error.Code != "body_too_large" {
		t.Fatalf("33 MiB module: %d %s", code, e.raw)
	}
	// Without a length: streamed, and cut off at the limit.
	if code, e, _ := postModule(t, p, "/v1/providers/inspect", io.MultiReader(bytes.NewReader(big))); code != 413 {
		t.Fatalf("33 MiB streamed module: %d %s", code, e.raw)
	}

	// Two uploads that never finish hold both slots.
	var pipes []*io.PipeWriter
	done := make(chan int, 2)
	for i := 0; i < 2; i++ {
		pr, pw := io.Pipe()
		pipes = append(pipes, pw)
		go func() {
			code, _, _, _ := sendModule(p, "/v1/providers/inspect", pr)
			done <- code
		}()
		if _, err := pw.Write([]byte{0, 'a', 's', 'm'}); err != nil {
			t.Fatal(err)
		}
	}
	module := buildWatModule(t, "static_list", 2)
	_, bin := sha256File(t, module)
	code, e, hdr := postModule(t, p, "/v1/providers/inspect", bytes.NewReader(bin))
	if code != 503 || hdr.Get("Retry-After") == "" || !strings.Contains(e.Error.Message, "already running") {
		t.Fatalf("third concurrent inspect: %d %s (Retry-After %q)", code, e.raw, hdr.Get("Retry-After"))
	}
	for _, pw := range pipes {
		pw.Close()
	}
	for i := 0; i < 2; i++ {
		if c := <-done; c != 422 && c != 400 {
			t.Fatalf("truncated upload answered %d", c)
		}
	}
	// The slots are free again.
	if code, e, _ := postModule(t, p, "/v1/providers/inspect", bytes.NewReader(bin)); code != 200 {
		t.Fatalf("inspect after the slots were freed: %d %s", code, e.raw)
	}
	if rss := procStatus(t, pid, "VmRSS"); rss > base+(2*33+64)<<10 {
		t.Fatalf("RSS %d kB after uploads, baseline %d kB", rss, base)
	}
}
