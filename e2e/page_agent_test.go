package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/internal/testsupport"
)

// The page's view of the agent in a box: the Conversations action of a
// workspace row reads the box's conversations through companion's agent
// proxy, and the State column counts the connections open to it.

// conversationRow is a page expression: the conversations panel lists a
// conversation titled title with status.
func conversationRow(title, status string) string {
	return fmt.Sprintf(`[...document.querySelectorAll("#conv-table tbody tr")].some(r =>
	  r.cells[0].textContent.startsWith(%q) && r.cells[1].textContent === %q && r.cells[2].textContent !== "—")`, title, status)
}

// agentBody is what POST /api/conversations takes: the emulator in the
// test boxes runs no model, so any agent will do.
func agentBody(title string) map[string]any {
	return map[string]any{"title": title, "agent": map[string]any{"kind": "Agent", "llm": map[string]any{"model": "test-model", "usage_id": "agent"}, "tools": []any{}}}
}

// createRunning creates a Docker workspace as the client's user and
// waits until it runs.
func (c *webClient) createRunning(name string) string {
	c.t.Helper()
	var ws struct{ Workspace workspace }
	c.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": name}, &ws)
	testsupport.Poll(c.t, 2*time.Minute, func() error {
		var got struct{ Workspace workspace }
		c.must(200, "GET", "/v1/workspaces/"+ws.Workspace.ID, nil, &got)
		if got.Workspace.State != "running" {
			return fmt.Errorf("workspace %s is %s", name, got.Workspace.State)
		}
		return nil
	})
	return ws.Workspace.ID
}

// TestPageConversationsServe: companion serve --auth local with Docker,
// the page signed in with a session cookie. A conversation alice started
// through the API beforehand is listed with its title, status and last
// activity by the row's Conversations action; her paused box is woken by
// the same action ("Waking the box…") and then listed; bob's workspace's
// agent route and connect are 404 from her browser session, over HTTP
// and WebSocket alike.
func TestPageConversationsServe(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	data := t.TempDir()
	addUser(t, data, "alice", "alice-password-1")
	addUser(t, data, "bob", "bob-password-22")
	p := start(t, options{mode: "serve", dataDir: data, args: []string{"--auth", "local", "--docker-image", image, "--docker-scope", scope}})
	alice, bob := newWebClient(t, p.ready.URL), newWebClient(t, p.ready.URL)
	alice.login("alice", "alice-password-1")
	bob.login("bob", "bob-password-22")
	mine, theirs := alice.createRunning("alices-box"), bob.createRunning("bobs-box")
	alice.must(201, "POST", "/v1/workspaces/"+mine+"/agent/api/conversations", agentBody("planned through the API"), nil)

	tb := openTab(t, p.ready.PageURL, 1400, 1000)
	tb.waitJS("the login form", `!document.querySelector("#login-form").hidden`, 30*time.Second)
	tb.typeInto("#l-name", "alice")
	tb.typeInto("#l-password", "alice-password-1")
	tb.click(`#login-form button[type="submit"]`)
	tb.waitJS("alice's running box", stateIs(mine, "running"), 30*time.Second)

	action := row(mine) + ` button[data-action="conversations"]`
	if label := evalIn[string](tb, fmt.Sprintf(`document.querySelector(%q).getAttribute("aria-label")`, action)); label != "Conversations in alices-box" {
		t.Fatalf("the action's label is %q", label)
	}
	tb.click(action)
	tb.waitJS("the conversation started through the API", conversationRow("planned through the API", "idle"), 30*time.Second)
	if got := tb.text("#conv-of"); got != "Conversations in alices-box (running)" {
		t.Errorf("the panel's heading: %q", got)
	}

	// Paused: the action wakes the box, says so meanwhile, then lists.
	tb.click("#conv-close")
	alice.must(202, "POST", "/v1/workspaces/"+mine+"/pause", map[string]any{}, nil)
	tb.waitJS("alice's box paused", stateIs(mine, "paused"), time.Minute)
	// The audit list names her, not "user:alice".
	tb.waitJS("alice by name in the audit list", `(document.querySelector("#audit-refresh").click(),
	  [...document.querySelectorAll('#audit-table tr[data-action="pause"] td[title^="user:alice (u_"]')].some(td => td.textContent === "alice"))`, 30*time.Second)
	evalIn[bool](tb, `window.__convStatus = []; new MutationObserver(() => window.__convStatus.push(document.querySelector("#conv-status").textContent))
	  .observe(document.querySelector("#conv-status"), {childList: true, characterData: true, subtree: true}); true`)
	tb.click(action)
	tb.waitJS("the conversation after the wake", conversationRow("planned through the API", "idle"), 2*time.Minute)
	tb.waitJS("alice's box running again", stateIs(mine, "running"), 30*time.Second)
	if seen := evalIn[[]string](tb, `window.__convStatus`); len(seen) == 0 || !strings.HasPrefix(seen[0], "Waking the box…") {
		t.Errorf("the panel did not say it was waking the box: %q", seen)
	}

	// Bob's box is not alice's to reach, whatever the route.
	for _, js := range []string{
		`fetch("v1/workspaces/` + theirs + `/agent/api/conversations/search").then(r => r.status)`,
		`fetch("v1/workspaces/` + theirs + `/connect", {method: "POST"}).then(r => r.status)`,
	} {
		if code := evalIn[float64](tb, js); code != 404 {
			t.Errorf("%s from alice's page: %v, want 404", js, code)
		}
	}
	h := http.Header{"Cookie": {alice.cookieHeader()}}
	ws := strings.Replace(p.ready.URL, "http://", "ws://", 1) + "/v1/workspaces/" + theirs + "/agent/sockets/bash-events"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, resp, err := websocket.DefaultDialer.DialContext(ctx, ws, h)
	contract.CheckHandshake(ws, h, resp)
	if err == nil || resp == nil || resp.StatusCode != 404 {
		if conn != nil {
			conn.Close()
		}
		t.Errorf("a socket to bob's agent with alice's cookie: %v %v, want 404", resp, err)
	}
	tb.checkClean(append(probed, "/v1/login", "/v1/ws", theirs)...)
}

// TestPageConversationsDesktop: desktop mode with the launch token. A
// conversation started through the API is listed by the Conversations
// action; a request held open through the proxy shows as "agent: 1" in
// the workspace's State cell until it ends.
func TestPageConversationsDesktop(t *testing.T) {
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-image", boxImage(t), "--docker-scope", dockerScope(t)}})
	ws := p.createRunning("desk")["desk"]
	if code, _, raw := p.agentReq("POST", ws.ID, "/api/conversations", `{"title":"from a script","agent":{"kind":"Agent","llm":{"model":"m"}}}`, nil); code != 201 {
		t.Fatalf("start a conversation: %d %s", code, raw)
	}

	tb := openTab(t, p.ready.PageURL, 1400, 1000)
	tb.waitJS("the running box", stateIs(ws.ID, "running"), 30*time.Second)
	tb.click(row(ws.ID) + ` button[data-action="conversations"]`)
	tb.waitJS("the conversation", conversationRow("from a script", "idle"), 30*time.Second)
	tb.waitJS("the count", `document.querySelector("#conv-status").textContent.startsWith("1 conversation,")`, 10*time.Second)

	// A request whose body is still arriving is an open connection.
	badge := row(ws.ID) + ` td[data-col="state"] .agent-conns`
	if !evalIn[bool](tb, fmt.Sprintf(`document.querySelector(%q).hidden`, badge)) {
		t.Fatal("the agent badge shows with nothing open")
	}
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", p.ready.URL+"/v1/workspaces/"+ws.ID+"/agent/api/conversations", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.ready.Token)
	req.Header.Set("Content-Type", "application/json")
	done := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	if _, err := pw.Write([]byte(`{"title":`)); err != nil {
		t.Fatal(err)
	}
	tb.waitJS("the agent badge", fmt.Sprintf(`!document.querySelector(%[1]q).hidden && document.querySelector(%[1]q).textContent === "agent: 1"`, badge), 20*time.Second)
	pw.Write([]byte(`"held open"}`))
	pw.Close()
	if code := <-done; code != 201 {
		t.Fatalf("the held request: %d", code)
	}
	tb.waitJS("the badge gone", fmt.Sprintf(`document.querySelector(%q).hidden`, badge), 20*time.Second)

	// Chromium opens an agent-server socket through companion with the
	// launch token as a subprotocol entry (it cannot send headers on a
	// WebSocket), and gets companion.v1 answered: the agent-server selects
	// none, and a browser fails a handshake that selects none of what it
	// offered.
	opened := fmt.Sprintf(`new Promise((ok) => {
		const ws = new WebSocket(%q, ["companion.v1", "companion.bearer." + %q]);
		ws.onopen = () => { ok(ws.protocol); ws.close(); };
		ws.onerror = () => ok("error");
	})`, strings.Replace(p.ready.URL, "http", "ws", 1)+"/v1/workspaces/"+ws.ID+"/agent/sockets/bash-events", p.ready.Token)
	if got := evalIn[string](tb, opened); got != "companion.v1" {
		t.Errorf("a browser socket to the agent through companion: %q, want it open with companion.v1", got)
	}
	tb.checkClean(probed...)
}
