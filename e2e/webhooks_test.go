package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/hookreceiver"
)

type wireHook struct {
	ID        string   `json:"id"`
	URL       string   `json:"url"`
	Events    []string `json:"events"`
	AccountID *string  `json:"account_id"`
}

type wireDelivery struct {
	ID          string     `json:"id"`
	EventID     string     `json:"event_id"`
	Event       string     `json:"event"`
	State       string     `json:"state"`
	Attempts    int        `json:"attempts"`
	LastStatus  *int       `json:"last_status"`
	LastError   *string    `json:"last_error"`
	NextAttempt *time.Time `json:"next_attempt_at"`
	DeliveredAt *time.Time `json:"delivered_at"`
}

type hookData struct {
	WorkspaceID      string     `json:"workspace_id"`
	DeleteAfter      *time.Time `json:"delete_after"`
	KeepURL          string     `json:"keep_url"`
	KeepURLExpiresAt *time.Time `json:"keep_url_expires_at"`
	Export           *struct {
		ID            string `json:"id"`
		URL           string `json:"url"`
		ArchiveSHA256 string `json:"archive_sha256"`
	} `json:"export"`
	Reason string `json:"reason"`
}

func dataOf(t *testing.T, e hookreceiver.Event) hookData {
	t.Helper()
	var d hookData
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatalf("event %s data %s: %v", e.ID, e.Data, err)
	}
	return d
}

// waitEvents waits until the receiver accepted events of typ for every
// workspace in ids, and returns them by workspace.
func waitEvents(t *testing.T, rcv *hookreceiver.Receiver, typ string, ids ...string) map[string]hookreceiver.Event {
	t.Helper()
	out := map[string]hookreceiver.Event{}
	testsupport.Poll(t, 90*time.Second, func() error {
		for _, e := range rcv.Events(typ) {
			d := dataOf(t, e)
			out[d.WorkspaceID] = e
		}
		for _, id := range ids {
			if _, ok := out[id]; !ok {
				return fmt.Errorf("no %s for %s yet (have %d events)", typ, id, len(rcv.Events("")))
			}
		}
		return nil
	})
	return out
}

// rawCall is a request without companion's credential (a keep link is
// its own).
func rawCall(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestWebhooksServe drives webhooks through the built binary in serve
// mode against a receiver in the test that verifies every signature the
// documented way: retention warnings arrive while the workspaces are still
// there, scheduled, with a keep link; the link keeps one (a GET of it
// changes nothing, a tampered one is refused); the other is deleted while
// the receiver is down, companion restarts, and the receiver, back up,
// gets the delete.done with the export's location and SHA-256 (the ones
// the export record has), each delivery accepted exactly once; a forged
// request is refused by the receiver.
func TestWebhooksServe(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	rcv := hookreceiver.Start(t)
	data := t.TempDir()
	args := []string{"--listen", "127.0.0.1:0", "--docker-image", image, "--docker-scope", scope, "--retention-interval", "200ms",
		"--reconcile-interval", "1h", "--webhooks-allow-private", "--webhook-retry-min", "100ms", "--webhook-retry-max", "300ms"}
	p := start(t, options{mode: "serve", dataDir: data, args: args})

	// Bad input is refused with the field named, and stores nothing.
	for _, bad := range []map[string]any{
		{"url": rcv.URL, "events": []string{"delete.maybe"}},
		{"url": rcv.URL},
		{"url": "ftp://example.com/x", "events": []string{"delete.done"}},
		{"url": rcv.URL, "events": []string{"delete.done"}, "account_id": "acc_nobody"},
	} {
		code, raw := p.call("POST", "/v1/webhooks", bad, nil)
		if code != 400 && code != 404 {
			t.Errorf("POST /v1/webhooks %v: %d %s; want a refusal", bad, code, raw)
		}
	}
	var created struct {
		Webhook wireHook `json:"webhook"`
		Secret  string   `json:"secret"`
	}
	p.must(201, "POST", "/v1/webhooks", map[string]any{"url": rcv.URL,
		"events": []string{"retention.warning", "delete.done", "delete.blocked", "export.failed", "account.unhealthy"}}, &created)
	if !strings.HasPrefix(created.Secret, "whsec_") || created.Webhook.ID == "" {
		t.Fatalf("created %+v", created)
	}
	rcv.SetSecret(created.Secret)
	var list struct{ Webhooks []json.RawMessage }
	raw := p.must(200, "GET", "/v1/webhooks", nil, &list)
	if len(list.Webhooks) != 1 || strings.Contains(string(raw), created.Secret) {
		t.Fatalf("list %s: want the one webhook, without its secret", raw)
	}

	ws := p.createRunning("keepme", "deleteme")
	keep, del := ws["keepme"], ws["deleteme"]
	keep, del = p.pauseAndWait(keep.ID), p.pauseAndWait(del.ID)

	// Deleted an hour after the pause, warned two hours before: warned now.
	p.must(200, "PUT", "/v1/accounts/local-docker/retention", map[string]any{"enabled": true, "paused_for_seconds": 3600, "warn_before_seconds": 7200}, nil)
	warned := waitEvents(t, rcv, "retention.warning", keep.ID, del.ID)
	for _, w := range []workspace{keep, del} {
		var got struct{ Workspace workspace }
		p.must(200, "GET", "/v1/workspaces/"+w.ID, nil, &got)
		d := dataOf(t, warned[w.ID])
		if got.Workspace.DeleteAfter == nil || d.DeleteAfter == nil || !got.Workspace.DeleteAfter.Equal(*d.DeleteAfter) || !d.DeleteAfter.After(time.Now()) {
			t.Fatalf("warning for %s says delete_after %v, the workspace %v: want the same time, still ahead", w.Name, d.DeleteAfter, got.Workspace.DeleteAfter)
		}
		if !strings.HasPrefix(d.KeepURL, p.ready.URL+"/keep/") || d.KeepURLExpiresAt == nil {
			t.Fatalf("keep link %q (expires %v)", d.KeepURL, d.KeepURLExpiresAt)
		}
	}

	// The keep link: a GET (a link preview) changes nothing, a tampered
	// token is refused, a POST keeps, and only that workspace.
	link := dataOf(t, warned[keep.ID]).KeepURL
	if code, body := rawCall(t, "GET", link); code != 200 || !strings.Contains(body, "<form method=\"post\">") {
		t.Fatalf("GET keep link: %d %s", code, body)
	}
	i := strings.LastIndex(link, ".") + 1 // the signature's first character
	repl := "A"
	if link[i] == 'A' {
		repl = "B"
	}
	tampered := link[:i] + repl + link[i+1:]
	if code, body := rawCall(t, "POST", tampered); code != 404 {
		t.Fatalf("tampered keep link: %d %s", code, body)
	}
	type wsAnswer struct{ Workspace workspace }
	var got wsAnswer
	p.must(200, "GET", "/v1/workspaces/"+keep.ID, nil, &got)
	if got.Workspace.Keep || got.Workspace.DeleteAfter == nil {
		t.Fatalf("a GET or a bad link changed the workspace: %+v", got.Workspace)
	}
	if code, body := rawCall(t, "POST", link); code != 200 || !strings.Contains(body, `"kept":true`) {
		t.Fatalf("POST keep link: %d %s", code, body)
	}
	got = wsAnswer{} // a field the answer leaves out must not keep an old value
	p.must(200, "GET", "/v1/workspaces/"+keep.ID, nil, &got)
	if !got.Workspace.Keep || got.Workspace.DeleteAfter != nil {
		t.Fatalf("kept workspace %+v; want keep, no delete_after", got.Workspace)
	}
	got = wsAnswer{}
	p.must(200, "GET", "/v1/workspaces/"+del.ID, nil, &got)
	if got.Workspace.Keep || got.Workspace.DeleteAfter == nil {
		t.Fatalf("the link kept another workspace too: %+v", got.Workspace)
	}

	// The receiver goes down; the policy now deletes at once: deleteme
	// goes, keepme stays.
	rcv.SetDown(true)
	p.must(200, "PUT", "/v1/accounts/local-docker/retention", map[string]any{"enabled": true, "paused_for_seconds": 1, "warn_before_seconds": 7200}, nil)
	testsupport.Poll(t, 120*time.Second, func() error {
		if code, _ := p.call("GET", "/v1/workspaces/"+del.ID, nil, nil); code != 404 {
			return fmt.Errorf("deleteme still there (%d)", code)
		}
		var ds struct{ Deliveries []wireDelivery }
		p.must(200, "GET", "/v1/webhooks/"+created.Webhook.ID+"/deliveries", nil, &ds)
		for _, d := range ds.Deliveries {
			if d.Event == "delete.done" && d.State == "pending" && d.Attempts >= 1 && d.LastStatus != nil && *d.LastStatus == 503 && d.NextAttempt != nil {
				return nil
			}
		}
		return fmt.Errorf("no delete.done tried and pending yet: %+v", ds.Deliveries)
	})
	if len(rcv.Events("delete.done")) != 0 {
		t.Fatal("a delete.done was accepted while the receiver was down")
	}
	got = wsAnswer{}
	p.must(200, "GET", "/v1/workspaces/"+keep.ID, nil, &got)
	if !got.Workspace.Keep || got.Workspace.State != "paused" || got.Workspace.DeleteAfter != nil {
		t.Fatalf("kept workspace after the delete pass: %+v", got.Workspace)
	}

	// companion restarts; the receiver comes back; the outbox goes out.
	firstURL := p.ready.URL // links name the address of the time (--public-url in production)
	p.term()
	rcv.SetDown(false)
	p = start(t, options{mode: "serve", dataDir: data, args: args})
	done := waitEvents(t, rcv, "delete.done", del.ID)[del.ID]
	d := dataOf(t, done)
	if d.Export == nil || d.Export.ArchiveSHA256 == "" || d.Export.URL != firstURL+"/v1/exports/"+d.Export.ID {
		t.Fatalf("delete.done %s: want the export's location and SHA-256", done.Raw)
	}
	var exp struct {
		Export struct {
			ID            string  `json:"id"`
			WorkspaceID   string  `json:"workspace_id"`
			Verified      bool    `json:"verified"`
			ArchiveSHA256 *string `json:"archive_sha256"`
		} `json:"export"`
	}
	p.must(200, "GET", "/v1/exports/"+d.Export.ID, nil, &exp)
	if !exp.Export.Verified || exp.Export.WorkspaceID != del.ID || exp.Export.ArchiveSHA256 == nil || *exp.Export.ArchiveSHA256 != d.Export.ArchiveSHA256 {
		t.Fatalf("the export %+v does not match the event's %+v", exp.Export, d.Export)
	}

	// Every delivery went out and was accepted once.
	testsupport.Poll(t, 60*time.Second, func() error {
		var ds struct{ Deliveries []wireDelivery }
		p.must(200, "GET", "/v1/webhooks/"+created.Webhook.ID+"/deliveries", nil, &ds)
		for _, x := range ds.Deliveries {
			if x.State != "delivered" || x.DeliveredAt == nil {
				return fmt.Errorf("delivery %+v not delivered yet", x)
			}
		}
		if len(ds.Deliveries) < 4 {
			return fmt.Errorf("%d deliveries; want at least the 3 warnings and the delete", len(ds.Deliveries))
		}
		return nil
	})
	refused, whileDown, dups := rcv.Stats()
	if refused != 0 || whileDown == 0 || len(dups) != 0 {
		t.Fatalf("receiver: %d refused signatures, %d answered while down, duplicates %v; want 0, some, none", refused, whileDown, dups)
	}

	// A forged delivery (the right shape, a made-up signature) and a
	// replayed real one with its body changed are refused by the
	// receiver's documented check.
	forge := func(sig string, body []byte) int {
		req, _ := http.NewRequest("POST", rcv.URL, strings.NewReader(string(body)))
		req.Header.Set("Companion-Signature", sig)
		req.Header.Set("Idempotency-Key", "dlv_forged")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	evil := []byte(strings.Replace(string(done.Raw), d.Export.ArchiveSHA256, strings.Repeat("0", 64), 1))
	if c := forge(fmt.Sprintf("t=%d,v1=%s", time.Now().Unix(), strings.Repeat("ab", 32)), evil); c != 401 {
		t.Errorf("forged signature answered %d; want 401", c)
	}
	if c := forge(done.Signature, evil); c != 401 {
		t.Errorf("real signature over a changed body answered %d; want 401", c)
	}
	if hookreceiver.Verify(created.Secret, done.Signature, done.Raw, time.Now().Add(hookreceiver.Tolerance+time.Minute)) {
		t.Error("a signature replayed after the tolerance still verifies")
	}
	if refused, _, _ := rcv.Stats(); refused != 2 {
		t.Errorf("receiver refused %d; want the 2 forgeries", refused)
	}

	// Deleting the webhook removes it and its deliveries.
	p.must(204, "DELETE", "/v1/webhooks/"+created.Webhook.ID, nil, nil)
	p.must(404, "GET", "/v1/webhooks/"+created.Webhook.ID+"/deliveries", nil, nil)
}

// TestWebhooksIsolation: with sign-in, one user never sees, reads the
// deliveries of, rotates the secret of, or deletes another's webhook; a hook scoped to an
// account must name one the user may see; without
// --webhooks-allow-private a loopback URL is refused; the desktop has no
// webhook routes.
func TestWebhooksIsolation(t *testing.T) {
	data := t.TempDir()
	addUser(t, data, "alice", "alice-password-1")
	addUser(t, data, "bob", "bob-password-22")
	p := start(t, options{mode: "serve", dataDir: data, args: []string{"--listen", "127.0.0.1:0", "--auth", "local"}})
	alice, bob := newWebClient(t, p.ready.URL), newWebClient(t, p.ready.URL)
	alice.login("alice", "alice-password-1")
	bob.login("bob", "bob-password-22")

	if code, raw, _ := alice.do("POST", "/v1/webhooks", map[string]any{"url": "http://127.0.0.1:9/h", "events": []string{"delete.done"}}, nil); code != 400 || !strings.Contains(string(raw), "--webhooks-allow-private") {
		t.Fatalf("loopback URL without the flag: %d %s", code, raw)
	}
	var created struct {
		Webhook wireHook `json:"webhook"`
		Secret  string   `json:"secret"`
	}
	alice.must(201, "POST", "/v1/webhooks", map[string]any{"url": "https://hooks.example.com/alice", "events": []string{"delete.done"}}, &created)
	var list struct{ Webhooks []wireHook }
	bob.must(200, "GET", "/v1/webhooks", nil, &list)
	if len(list.Webhooks) != 0 {
		t.Fatalf("bob sees %+v", list.Webhooks)
	}
	bob.must(404, "GET", "/v1/webhooks/"+created.Webhook.ID+"/deliveries", nil, nil)
	bob.must(404, "DELETE", "/v1/webhooks/"+created.Webhook.ID, nil, nil)
	bob.must(404, "POST", "/v1/webhooks/"+created.Webhook.ID+"/rotate-secret", map[string]any{"previous_valid_for": 0}, nil)
	alice.must(200, "GET", "/v1/webhooks", nil, &list)
	if len(list.Webhooks) != 1 || list.Webhooks[0].ID != created.Webhook.ID {
		t.Fatalf("alice's list after bob's tries: %+v", list.Webhooks)
	}
	alice.must(404, "POST", "/v1/webhooks", map[string]any{"url": "https://hooks.example.com/a2", "events": []string{"delete.done"}, "account_id": "acc_not_hers"}, nil)
	var ds struct{ Deliveries []wireDelivery }
	alice.must(200, "GET", "/v1/webhooks/"+created.Webhook.ID+"/deliveries", nil, &ds)
	if code, _, _ := newWebClient(t, p.ready.URL).do("GET", "/v1/webhooks", nil, nil); code != 401 {
		t.Fatalf("anonymous list: %d", code)
	}

	d := start(t, options{dataDir: t.TempDir()})
	if code, _ := d.call("GET", "/v1/webhooks", nil, nil); code != 404 {
		t.Fatalf("desktop GET /v1/webhooks: %d; want 404 (a serve feature)", code)
	}
}
