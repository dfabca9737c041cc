package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestDesktopSpine walks one Docker workspace through its whole life as
// Canvas desktop would, across a restart of companion.
func TestDesktopSpine(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	dataDir := t.TempDir()
	opts := options{dataDir: dataDir, args: []string{"--docker-image", image, "--docker-scope", scope}}
	p := start(t, opts)

	resp, err := http.Get(p.ready.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz without a token: %v %v", resp, err)
	}
	resp.Body.Close()
	if p.ready.Version != "e2e" || len(p.ready.Token) < 32 {
		t.Fatalf("ready line: %+v", p.ready)
	}

	var provs struct {
		Providers []struct {
			Name      string `json:"name"`
			Available bool   `json:"available"`
			Reason    string `json:"reason"`
		} `json:"providers"`
	}
	p.must(200, "GET", "/v1/providers", nil, &provs)
	dockerOK := false
	for _, pr := range provs.Providers {
		if pr.Name == "docker" {
			dockerOK = pr.Available
		}
	}
	if !dockerOK {
		t.Fatalf("docker provider not available: %+v", provs)
	}
	var accts struct {
		Accounts []struct {
			ID       string `json:"id"`
			Provider string `json:"provider"`
		} `json:"accounts"`
	}
	p.must(200, "GET", "/v1/accounts", nil, &accts)
	if len(accts.Accounts) != 1 || accts.Accounts[0].Provider != "docker" {
		t.Fatalf("default accounts: %+v", accts)
	}
	acct := accts.Accounts[0].ID

	s := p.dial(-1)
	snap := s.next(10 * time.Second)
	if snap.Type != "snapshot" || len(snap.Workspaces) != 0 || snap.ServerTime.IsZero() {
		t.Fatalf("first message: %s", snap.Raw)
	}

	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acct, "name": "spine"}, &created)
	id := created.Workspace.ID
	if created.Workspace.State != "creating" || id == "" {
		t.Fatalf("create answered %+v", created.Workspace)
	}
	s.waitFor("creating upsert", 10*time.Second, upsertOf(id, "creating"))
	running := s.waitFor("running", 60*time.Second, upsertOf(id, "running"))
	if running.Workspace.BoxID == "" || !strings.HasPrefix(running.Workspace.BoxURL, "http://127.0.0.1:") {
		t.Fatalf("running workspace without box: %s", running.Raw)
	}
	if strings.Contains(string(running.Raw), "key") {
		t.Fatalf("stream message mentions a key: %s", running.Raw)
	}
	box := running.Workspace.BoxID

	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	paused := s.waitFor("paused", 60*time.Second, upsertOf(id, "paused"))
	w := paused.Workspace
	if w.PausedAt == nil || w.SizeBytes == nil || w.SizeSource == nil || *w.SizeSource != "docker_engine:used" || w.SizeAt == nil {
		t.Fatalf("paused upsert lacks paused_at or an honest size: %s", paused.Raw)
	}
	if age := paused.ServerTime.Sub(*w.PausedAt); age < 0 || age > time.Minute {
		t.Fatalf("paused age %v from server_time %v and paused_at %v", age, paused.ServerTime, *w.PausedAt)
	}

	p.must(202, "POST", "/v1/workspaces/"+id+"/resume", nil, nil)
	resumed := s.waitFor("running again", 60*time.Second, upsertOf(id, "running"))
	if resumed.Workspace.BoxID != box || resumed.Workspace.PausedAt != nil {
		t.Fatalf("resume changed identity or kept paused_at: %s", resumed.Raw)
	}

	// Restart: state, revisions and ?since survive.
	var before struct {
		Rev        int64       `json:"rev"`
		Workspaces []workspace `json:"workspaces"`
	}
	p.must(200, "GET", "/v1/workspaces", nil, &before)
	p.stop()
	p = start(t, opts)
	var after struct {
		Rev        int64       `json:"rev"`
		Workspaces []workspace `json:"workspaces"`
	}
	p.must(200, "GET", "/v1/workspaces", nil, &after)
	if len(after.Workspaces) != 1 || after.Workspaces[0].ID != id || after.Workspaces[0].BoxID != box {
		t.Fatalf("workspaces after restart: %+v", after.Workspaces)
	}
	if after.Rev < before.Rev {
		t.Fatalf("revision went back across the restart: %d -> %d", before.Rev, after.Rev)
	}
	caught := p.dial(before.Rev)
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	// Catching up from a known revision replays changes; it never
	// starts over with a snapshot.
	if first := caught.next(30 * time.Second); first.Type != "upsert" || first.Rev <= before.Rev {
		t.Fatalf("first message after reconnecting with ?since=%d: %s", before.Rev, first.Raw)
	}
	m := caught.waitFor("paused after restart", 60*time.Second, upsertOf(id, "paused"))
	if m.Rev <= before.Rev {
		t.Fatalf("revision did not continue: %d after %d", m.Rev, before.Rev)
	}
	revBeforeDelete := m.Rev

	var preview struct {
		Token    string    `json:"token"`
		Lost     []string  `json:"lost"`
		Survives []string  `json:"survives"`
		Expires  time.Time `json:"expires_at"`
	}
	p.must(200, "POST", "/v1/workspaces/"+id+"/delete-preview", nil, &preview)
	if preview.Token == "" || len(preview.Lost) == 0 || preview.Expires.IsZero() {
		t.Fatalf("preview: %+v", preview)
	}
	p.must(202, "POST", "/v1/workspaces/"+id+"/delete", map[string]string{"token": preview.Token}, nil)
	caught.waitFor("remove", 60*time.Second, func(m wsMsg) bool { return m.Type == "remove" && m.ID == id })
	if containerExists(t, box) {
		t.Fatalf("container %s still exists after delete", box)
	}

	// A client that missed the delete learns about it from ?since.
	late := p.dial(revBeforeDelete)
	late.waitFor("remove on catch-up", 10*time.Second, func(m wsMsg) bool { return m.Type == "remove" && m.ID == id })
	// A client from the future gets a fresh snapshot.
	future := p.dial(1 << 40)
	if m := future.next(10 * time.Second); m.Type != "snapshot" || len(m.Workspaces) != 0 {
		t.Fatalf("since from the future: %s", m.Raw)
	}
	p.must(404, "GET", "/v1/workspaces/"+id, nil, nil)
}

// TestBadInputGetsClearErrors checks the error paths a front end can hit.
func TestBadInputGetsClearErrors(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-image", image, "--docker-scope", scope}})

	var e apiError
	p.must(400, "POST", "/v1/workspaces", `{"account_id": "local-docker", "name": `, &e)
	if e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("malformed JSON error: %+v", e)
	}
	big := fmt.Sprintf(`{"account_id":"local-docker","name":"x","options":{"a":%q}}`, strings.Repeat("x", 2<<20))
	p.must(413, "POST", "/v1/workspaces", big, nil)
	p.must(404, "POST", "/v1/workspaces/ws_doesnotexist/pause", nil, nil)
	p.must(404, "GET", "/v1/workspaces/ws_doesnotexist", nil, nil)
	p.must(400, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": ""}, nil)
	p.must(404, "POST", "/v1/workspaces", map[string]any{"account_id": "acc_nope", "name": "x"}, nil)

	s := p.dial(-1)
	s.next(10 * time.Second)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "bad-input"}, &created)
	id := created.Workspace.ID
	s.waitFor("running", 60*time.Second, upsertOf(id, "running"))
	e = apiError{}
	p.must(409, "POST", "/v1/workspaces/"+id+"/resume", nil, &e)
	if e.Error.State != "running" {
		t.Fatalf("illegal transition does not report the current state: %+v", e)
	}
	p.must(400, "POST", "/v1/workspaces/"+id+"/delete", map[string]string{"token": "forged"}, nil)
	p.must(400, "POST", "/v1/workspaces/"+id+"/delete", map[string]string{}, nil)

	// Nothing above may have changed the workspace.
	var got struct{ Workspace workspace }
	p.must(200, "GET", "/v1/workspaces/"+id, nil, &got)
	if got.Workspace.State != "running" || !containerExists(t, got.Workspace.BoxID) {
		t.Fatalf("bad requests changed the workspace: %+v", got.Workspace)
	}

	// The gate: no token, wrong Host (DNS rebinding), foreign Origin.
	req, _ := http.NewRequest("GET", p.ready.URL+"/v1/workspaces", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("no token: %v %v", resp, err)
	}
	req, _ = http.NewRequest("GET", p.ready.URL+"/v1/workspaces", nil)
	req.Header.Set("Authorization", "Bearer "+p.ready.Token)
	req.Host = "attacker.example:80"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Fatalf("rebound Host: %v %v", resp, err)
	}
	req, _ = http.NewRequest("POST", p.ready.URL+"/v1/workspaces/"+id+"/pause", nil)
	req.Header.Set("Authorization", "Bearer "+p.ready.Token)
	req.Header.Set("Origin", "https://evil.example")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Fatalf("foreign origin: %v %v", resp, err)
	}
}
