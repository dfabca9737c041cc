package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// lists reports whether c's GET /v1/providers names provider name, and
// whether it is available.
func lists(t *testing.T, c *webClient, name string) (listed, available bool) {
	t.Helper()
	var l providerList
	c.must(200, "GET", "/v1/providers", nil, &l)
	for _, p := range l.Providers {
		if p.Name == name {
			return true, p.Available
		}
	}
	return false, false
}

// waitLists waits until c lists name as available (want true) or not at
// all (want false).
func waitLists(t *testing.T, c *webClient, name string, want bool, who string) {
	t.Helper()
	testsupport.Poll(t, 60*time.Second, func() error {
		listed, available := lists(t, c, name)
		if want && !(listed && available) {
			return fmt.Errorf("%s does not list %s as available yet (listed %v)", who, name, listed)
		}
		if !want && listed {
			return fmt.Errorf("%s still lists %s", who, name)
		}
		return nil
	})
}

// TestReplicasShareInstalledModules: a provider module installed through
// replica A's HTTP API (a real module, built from source as a third party
// would) is listed by replica B without a restart; an account on it is
// added through B (B runs the module for the account's check) and used:
// the box the provider reports shows up adopted through B. The module is
// removed through B (after its account, which blocks it until then), and A
// stops listing it. Then the CLI path: `providers install --database-file`
// while the replicas run reaches both, `providers list --database-file`
// shows it, and `providers remove --database-file` takes it from both.
// Neither replica keeps the module as a file in its data dir: the bytes
// are in the database.
func TestReplicasShareInstalledModules(t *testing.T) {
	module := buildUnruly(t)
	sha, bin := sha256File(t, module)
	var listed atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer unruly-token" {
			http.Error(w, `{"error":"bad token"}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/boxes" {
			listed.Add(1)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"boxes":[{"id":"unruly-box-1","name":"made-in-the-console"}]}`)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/boxes/") {
			io.WriteString(w, `{}`)
			return
		}
		http.NotFound(w, r)
	}))
	defer upstream.Close()

	rs := startReplicas(t, 2, replicaOpts{Args: []string{"--reconcile-interval", "1s", "--lease-ttl", "2s"}})
	a, b := rs.Replicas[0], rs.Replicas[1]
	onA := rs.client(a.ready.URL)
	onB := rs.client(b.ready.URL)

	// Install through A.
	req, _ := http.NewRequest("POST", a.ready.URL+"/v1/providers?sha256="+sha, bytes.NewReader(bin))
	req.Header.Set("Content-Type", "application/wasm")
	req.Header.Set("Authorization", "Bearer "+rs.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("install through A: %d %s", resp.StatusCode, raw)
	}
	if listed, available := lists(t, onA, "unruly"); !listed || !available {
		t.Fatalf("A does not list the module it installed")
	}
	waitLists(t, onB, "unruly", true, "B")
	b.waitLog("provider module loaded: it was installed elsewhere", map[string]string{"module": "unruly", "sha256": sha}, 30*time.Second)
	for i, dir := range rs.data {
		if _, err := os.Stat(filepath.Join(dir, "modules", "unruly.wasm")); !os.IsNotExist(err) {
			t.Fatalf("replica %d keeps the module as a file in its data dir: %v", i, err)
		}
	}

	// An account on it, added and used through B.
	before := listed.Load()
	var added struct{ Account struct{ ID string } }
	onB.must(201, "POST", "/v1/accounts", map[string]any{"provider": "unruly", "label": "added on B",
		"config": map[string]string{"api_url": upstream.URL}, "credentials": map[string]string{"token": "unruly-token"}}, &added)
	if listed.Load() == before {
		t.Fatal("adding the account through B did not check its token at the provider")
	}
	b.waitLog("provider module ready", map[string]string{"module": "unruly"}, 60*time.Second) // B compiled and ran it
	waitAdopted(t, onB, added.Account.ID, "unruly-box-1")
	waitAccountOK(t, onB, added.Account.ID)

	// Removal through B: refused while the account uses the module, done
	// once it is gone; A follows.
	if code, raw, _ := onB.do("DELETE", "/v1/providers/unruly", nil, nil); code != 409 || !strings.Contains(string(raw), added.Account.ID) {
		t.Fatalf("removing a module an account uses: %d %s", code, raw)
	}
	onB.must(204, "DELETE", "/v1/accounts/"+added.Account.ID, nil, nil)
	onB.must(204, "DELETE", "/v1/providers/unruly", nil, nil)
	if listed, _ := lists(t, onB, "unruly"); listed {
		t.Fatal("B lists the module it removed")
	}
	waitLists(t, onA, "unruly", false, "A")
	a.waitLog("provider module unloaded: it was removed elsewhere", map[string]string{"module": "unruly"}, 30*time.Second)
	onA.must(400, "POST", "/v1/accounts", map[string]any{"provider": "unruly", "label": "too late",
		"config": map[string]string{"api_url": upstream.URL}, "credentials": map[string]string{"token": "unruly-token"}}, nil)

	// The CLI on the shared database, while the replicas run.
	cliData := t.TempDir()
	stdout, errs, code := runCLI(t, noKeyring, "", "providers", "install", "--yes", "--database-file", rs.dbFile, "--data-dir", cliData, module)
	if code != 0 || !strings.Contains(stdout, "Installed unruly") || !strings.Contains(stdout, "in the database") {
		t.Fatalf("providers install --database-file: exit %d\n%s%s", code, stdout, errs)
	}
	waitLists(t, onA, "unruly", true, "A")
	waitLists(t, onB, "unruly", true, "B")
	stdout, errs, code = runCLI(t, noKeyring, "", "providers", "list", "--json", "--database-file", rs.dbFile, "--data-dir", t.TempDir())
	var mods []struct {
		Name, SHA256, Status string
		Builtin              bool
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &mods) != nil {
		t.Fatalf("providers list --database-file: exit %d\n%s%s", code, stdout, errs)
	}
	found := false
	for _, m := range mods {
		if m.Name == "unruly" {
			found = m.SHA256 == sha && m.Status == "ok" && !m.Builtin
		}
	}
	if !found {
		t.Fatalf("providers list --database-file (another data dir) does not show unruly ok with its hash:\n%s", stdout)
	}
	stdout, errs, code = runCLI(t, noKeyring, "", "providers", "remove", "--database-file", rs.dbFile, "--data-dir", cliData, "unruly")
	if code != 0 || !strings.Contains(stdout, "Removed unruly") {
		t.Fatalf("providers remove --database-file: exit %d\n%s%s", code, stdout, errs)
	}
	waitLists(t, onA, "unruly", false, "A")
	waitLists(t, onB, "unruly", false, "B")
}
