package e2e

import (
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// compiledModules counts the compiled modules in a data dir's compile
// cache (wazero's files, not the host's "compiled" markers).
func compiledModules(t *testing.T, dataDir string) int {
	t.Helper()
	dir := filepath.Join(dataDir, "wasm-cache")
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "compiled" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			n++
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return n
}

// TestModulesCompiledOnlyWhenUsed: on a fresh data dir, companion serves
// and lists its three first-party providers without compiling any of
// them (empty compile cache, no compile line in the log); adding an
// account at the Daytona emulator runs exactly that module interpreted
// while it compiles, and the log says so, then announces the compile
// before and with its duration after, and the switch to compiled code.
// The others are still not compiled when companion stops.
func TestModulesCompiledOnlyWhenUsed(t *testing.T) {
	data := t.TempDir()
	p := start(t, options{dataDir: data, args: []string{"--docker-scope", dockerScope(t)}})
	var provs providerList
	p.must(200, "GET", "/v1/providers", nil, &provs)
	for _, name := range []string{"daytona", "e2b", "digitalocean"} {
		if !provs.available(name) {
			t.Fatalf("provider %s not listed as available: %+v", name, provs)
		}
	}
	if n := compiledModules(t, data); n != 0 {
		t.Fatalf("listing providers compiled %d modules", n)
	}
	if logs := p.stderr.String(); strings.Contains(logs, "compiling provider module") {
		t.Fatalf("a module was compiled with no account using it:\n%s", logs)
	}

	dt := daytona.New(daytona.Options{Token: cloudToken, Clock: emulator.NewWallClock(), Delays: &daytona.Delays{}})
	srv := httptest.NewServer(dt.Handler())
	t.Cleanup(func() { dt.Close(); srv.Close() })
	p.must(201, "POST", "/v1/accounts", map[string]any{
		"provider": "daytona", "label": "team", "config": map[string]string{"api_url": srv.URL + "/api"},
		"credentials": map[string]string{"token": cloudToken},
	}, nil)
	// The answer may come before the compile ends (it waits at most 3 s
	// for the first list); the module runs compiled once the log says so.
	deadline := time.Now().Add(2 * time.Minute)
	for !logHas(p.stderr.String(), `"msg":"provider module now runs compiled"`, `"module":"daytona"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the daytona module never became ready:\n%s", p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.stop()

	logs := p.stderr.String()
	for _, want := range []string{"provider module daytona runs interpreted while it compiles", "compiling provider module daytona (", "compiled provider module daytona in "} {
		if strings.Count(logs, want) != 1 {
			t.Errorf("the log has %q %d times, want once:\n%s", want, strings.Count(logs, want), logs)
		}
	}
	for _, name := range []string{"e2b", "digitalocean"} {
		if strings.Contains(logs, "compiling provider module "+name) {
			t.Errorf("%s was compiled though no account uses it", name)
		}
	}
	if n := compiledModules(t, data); n != 1 {
		t.Errorf("after stopping, the cache holds %d compiled modules, want 1", n)
	}
}

// logHas reports whether one line of logs contains every one of parts.
func logHas(logs string, parts ...string) bool {
	for _, line := range strings.Split(logs, "\n") {
		all := true
		for _, part := range parts {
			all = all && strings.Contains(line, part)
		}
		if all {
			return true
		}
	}
	return false
}
