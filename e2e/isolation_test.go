package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/internal/testsupport"
)

// These tests run the reconciler's isolation through the built binary: an
// installed Wasm module whose list takes 25 s, and one whose list invents
// boxes on every call (e2e/testdata/unruly), next to a healthy provider.

// buildUnruly builds e2e/testdata/unruly as a provider author would and
// returns the .wasm path.
func buildUnruly(t *testing.T) string { return buildModule(t, "e2e/testdata/unruly", "unruly") }

// installModule installs module into data with the CLI, answering yes.
func installModule(t *testing.T, data, module string) {
	t.Helper()
	install := exec.Command(companionBin, "providers", "install", "--data-dir", data, module)
	install.Stdin = strings.NewReader("y\n")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
}

// accountWire is an account as GET /v1/accounts and "account" stream
// messages carry it.
type accountWire struct {
	ID     string `json:"id"`
	Status struct {
		State     string     `json:"state"`
		ErrorCode string     `json:"error_code"`
		Message   string     `json:"message"`
		LastOKAt  *time.Time `json:"last_ok_at"`
	} `json:"status"`
	Flag *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"flag"`
}

// accountMsg decodes an "account" stream message; ok is false for others.
func accountMsg(m wsMsg) (a accountWire, ok bool) {
	if m.Type != "account" {
		return a, false
	}
	var msg struct {
		Account accountWire `json:"account"`
	}
	return msg.Account, json.Unmarshal(m.Raw, &msg) == nil
}

func (p *proc) account(id string) accountWire {
	p.t.Helper()
	var list struct {
		Accounts []accountWire `json:"accounts"`
	}
	p.must(200, "GET", "/v1/accounts", nil, &list)
	for _, a := range list.Accounts {
		if a.ID == id {
			return a
		}
	}
	p.t.Fatalf("account %s not listed", id)
	return accountWire{}
}

// slowAPI is the slow provider's API: every list is held for hold; the
// first one only until release is called.
type slowAPI struct {
	*httptest.Server
	token    string
	released chan struct{}
	once     sync.Once

	mu                sync.Mutex
	started, answered int
}

func newSlowAPI(t *testing.T, token string, hold time.Duration) *slowAPI {
	a := &slowAPI{token: token, released: make(chan struct{})}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+a.token {
			http.Error(w, `{"message":"bad token"}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/boxes" {
			http.Error(w, `{"message":"no such box"}`, http.StatusNotFound)
			return
		}
		a.mu.Lock()
		a.started++
		first := a.started == 1
		a.mu.Unlock()
		release := a.released
		if !first {
			release = nil
		}
		hold := time.NewTimer(hold) // the provider being slow, not a test waiting
		defer hold.Stop()
		select {
		case <-release:
		case <-hold.C:
		case <-r.Context().Done():
			return
		}
		a.mu.Lock()
		a.answered++
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"boxes":[{"id":"slow-1","name":"slow one"}]}`))
	}))
	t.Cleanup(func() { a.release(); a.Close() })
	return a
}

func (a *slowAPI) release() { a.once.Do(func() { close(a.released) }) }

func (a *slowAPI) counts() (started, answered int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.started, a.answered
}

// TestSlowModuleDoesNotDelayOtherAccounts: an account whose module takes
// 25 s to list is added at once (state checking, the outcome of its first
// list arriving later on the stream), and while the reconciler's own list
// of it hangs, a box deleted at a healthy provider is noticed within a few
// reconcile intervals (of 1 s).
func TestSlowModuleDoesNotDelayOtherAccounts(t *testing.T) {
	module := buildUnruly(t)
	data := t.TempDir()
	installModule(t, data, module)
	dt := daytona.New(daytona.Options{Token: cloudToken, Clock: emulator.NewWallClock(), Delays: &daytona.Delays{}})
	dtSrv := httptest.NewServer(dt.Handler())
	t.Cleanup(func() { dt.Close(); dtSrv.Close() })
	slow := newSlowAPI(t, "slow-token-9c2e", 25*time.Second)

	p := start(t, options{dataDir: data, args: []string{"--docker-scope", "unused"}})
	s := p.dial(-1)
	s.next(10 * time.Second)
	p.must(201, "POST", "/v1/accounts", map[string]any{
		"provider": "daytona", "config": map[string]string{"api_url": dtSrv.URL + "/api"},
		"credentials": map[string]string{"token": cloudToken},
	}, nil)
	foreign := dt.Seed(daytona.SeedSandbox{Name: "healthy"}).ID
	adopted := s.waitFor("the healthy box adopted", 30*time.Second, func(m wsMsg) bool {
		return m.Type == "upsert" && m.Workspace != nil && m.Workspace.BoxID == foreign
	}).Workspace

	// Adding the slow account answers while its first list hangs.
	var added struct{ Account accountWire }
	p.must(201, "POST", "/v1/accounts", map[string]any{
		"provider": "unruly", "config": map[string]string{"api_url": slow.URL},
		"credentials": map[string]string{"token": slow.token},
	}, &added)
	if added.Account.Status.State != "checking" {
		t.Fatalf("adding the slow account answered %+v, want state checking while its list runs", added.Account)
	}
	if started, answered := slow.counts(); started != 1 || answered != 0 {
		t.Fatalf("slow API: %d lists started, %d answered; want the first one still running", started, answered)
	}
	if a := p.account(added.Account.ID); a.Status.State != "checking" {
		t.Fatalf("slow account while its first list runs: %+v", a)
	}
	slow.release()
	// The adoption and the account's outcome may reach the stream in
	// either order.
	var listed, adoptedSlow bool
	s.waitFor("the first list's outcome and the slow account's box adopted", 30*time.Second, func(m wsMsg) bool {
		if a, ok := accountMsg(m); ok && a.ID == added.Account.ID && a.Status.State == "ok" {
			listed = true
		}
		if m.Type == "upsert" && m.Workspace != nil && m.Workspace.BoxID == "slow-1" {
			adoptedSlow = true
		}
		return listed && adoptedSlow
	})

	// From now on every list of the slow account hangs for 25 s. Once the
	// reconciler is inside one, delete the healthy box behind companion's
	// back.
	testsupport.Until(t, 30*time.Second, "the reconciler to list the slow account again", func() bool {
		started, _ := slow.counts()
		return started >= 2
	})
	req, _ := http.NewRequest("DELETE", dtSrv.URL+"/api/sandbox/"+foreign, nil)
	req.Header.Set("Authorization", "Bearer "+cloudToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("delete at the emulator: %s", resp.Status)
	}
	s.waitFor("the deleted box noticed while the slow list hangs", 10*time.Second, upsertOf(adopted.ID, "deleted"))
	if _, answered := slow.counts(); answered != 1 {
		t.Fatal("the slow list answered before the deletion was noticed; the test lost its point")
	}
}

// TestInventingModuleIsFlagged: a module whose list makes up 300 new box
// ids on every call gets its account flagged, and the store stops at the
// documented bound instead of filling.
func TestInventingModuleIsFlagged(t *testing.T) {
	module := buildUnruly(t)
	data := t.TempDir()
	installModule(t, data, module)
	p := start(t, options{dataDir: data, args: []string{"--docker-scope", "unused"}})
	s := p.dial(-1)
	s.next(10 * time.Second)

	var added struct{ Account accountWire }
	p.must(201, "POST", "/v1/accounts", map[string]any{
		"provider": "unruly", "config": map[string]string{"mode": "invent"},
		"credentials": map[string]string{"token": "invent-token"},
	}, &added)
	id := added.Account.ID
	flagged := s.waitFor("the account flagged on the stream", 60*time.Second, func(m wsMsg) bool {
		a, ok := accountMsg(m)
		return ok && a.ID == id && a.Flag != nil
	})
	a, _ := accountMsg(flagged)
	if a.Flag.Code != "inventing_boxes" || !strings.Contains(a.Flag.Message, "unruly") {
		t.Fatalf("flag: %+v", a.Flag)
	}
	listed := p.account(id)
	if listed.Flag == nil || listed.Flag.Code != "inventing_boxes" || listed.Status.LastOKAt == nil {
		t.Fatalf("GET /v1/accounts does not show the flag: %+v", listed)
	}

	// Three passes of 25 adoptions before the flag; none after. Let two
	// more passes run (last_ok_at moves) and count again.
	const bound = 75
	count := func() int {
		var list struct {
			Workspaces []workspace `json:"workspaces"`
		}
		p.must(200, "GET", "/v1/workspaces", nil, &list)
		return len(list.Workspaces)
	}
	if n := count(); n != bound {
		t.Fatalf("%d workspaces when flagged, want the bound %d", n, bound)
	}
	last := *listed.Status.LastOKAt
	for range 2 {
		testsupport.Poll(t, 30*time.Second, func() error {
			a := p.account(id)
			if a.Status.LastOKAt == nil || !a.Status.LastOKAt.After(last) {
				return fmt.Errorf("no further pass over the flagged account: %+v", a)
			}
			last = *a.Status.LastOKAt
			return nil
		})
	}
	if n := count(); n != bound {
		t.Fatalf("%d workspaces after more passes of a flagged account, want still %d", n, bound)
	}
	if n := strings.Count(s.seen.String(), `"type":"upsert"`); n > 2*bound {
		t.Fatalf("%d upserts on the stream, want at most %d (each adopted box, then its vanishing)", n, 2*bound)
	}
}
