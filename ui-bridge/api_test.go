package uibridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

func TestBodyErrors(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBodyBytes = 4 << 10 })
	cases := []struct {
		name, path, body, contentType string
		status                        int
		code, mention                 string
	}{
		{"malformed", "/v1/accounts", `{"provider": "docker",`, "application/json", 400, codeInvalidJSON, "line 1, column"},
		{"malformed line 3", "/v1/accounts", "{\n  \"provider\": \"docker\",\n  \"label\": nope\n}", "application/json", 400, codeInvalidJSON, "line 3, column 13"},
		{"unknown field", "/v1/accounts", `{"provider":"docker","tokne":"x"}`, "application/json", 400, codeInvalidJSON, `"tokne"`},
		{"wrong type", "/v1/accounts", `{"provider": 5}`, "application/json", 400, codeInvalidJSON, `"provider"`},
		{"nested wrong type", "/v1/workspaces", `{"account_id":"a","name":"n","lifecycle":{"paused_ttl_seconds":"1d"}}`, "application/json", 400, codeInvalidJSON, "lifecycle.paused_ttl_seconds"},
		{"trailing garbage", "/v1/accounts", `{"provider":"docker"} x`, "application/json", 400, codeInvalidJSON, "after the JSON object"},
		{"two objects", "/v1/accounts", `{"provider":"docker"}{}`, "application/json", 400, codeInvalidJSON, "after the JSON object"},
		{"array", "/v1/accounts", `[]`, "application/json", 400, codeInvalidJSON, "JSON object"},
		{"empty", "/v1/accounts", ``, "application/json", 400, codeInvalidJSON, "empty"},
		{"text/plain", "/v1/accounts", `{"provider":"docker"}`, "text/plain", 415, codeUnsupportedMedia, "application/json"},
		{"form", "/v1/accounts", `provider=docker`, "application/x-www-form-urlencoded", 415, codeUnsupportedMedia, "application/json"},
		{"no content type", "/v1/workspaces/ws_x/delete", `{"token":"t"}`, "", 415, codeUnsupportedMedia, "application/json"},
		{"optional body not JSON", "/v1/workspaces/ws_x/pause", `x=1`, "application/x-www-form-urlencoded", 415, codeUnsupportedMedia, "application/json"},
		{"optional body malformed", "/v1/workspaces/ws_x/pause", `{"a":`, "application/json", 400, codeInvalidJSON, "line 1"},
		{"optional body unknown field", "/v1/workspaces/ws_x/resume", `{"force":true}`, "application/json", 400, codeInvalidJSON, `"force"`},
		{"too large", "/v1/accounts", `{"provider":"` + strings.Repeat("x", 5<<10) + `"}`, "application/json", 413, codeBodyTooLarge, "4096"},
		{"too large optional", "/v1/workspaces/ws_x/pause", `{"a":"` + strings.Repeat("x", 5<<10) + `"}`, "application/json", 413, codeBodyTooLarge, "4096"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.t = t
			req, _ := http.NewRequest("POST", e.base+c.path, strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+e.token)
			if c.contentType != "" {
				req.Header.Set("Content-Type", c.contentType)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var er ErrorResponse
			json.NewDecoder(resp.Body).Decode(&er)
			if resp.StatusCode != c.status || er.Error.Code != c.code {
				t.Fatalf("status %d code %q (%s), want %d %q", resp.StatusCode, er.Error.Code, er.Error.Message, c.status, c.code)
			}
			if !strings.Contains(er.Error.Message, c.mention) {
				t.Fatalf("message %q does not mention %q", er.Error.Message, c.mention)
			}
		})
	}
	// Nothing was created by any of these.
	e.t = t
	if accts, _ := e.svc.Accounts(context.Background(), ""); len(accts) != 0 {
		t.Fatalf("bad requests created accounts: %v", accts)
	}
}

func TestDefaultBodyLimit(t *testing.T) {
	e := newEnv(t, nil)
	body := `{"provider":"` + strings.Repeat("x", DefaultMaxBodyBytes) + `"}`
	resp, b := e.do("POST", "/v1/accounts", body)
	e.expectError(resp, b, http.StatusRequestEntityTooLarge, codeBodyTooLarge)
}

func TestRoutesAndUnknownIDs(t *testing.T) {
	e := newEnv(t, nil)
	resp, body := e.do("GET", "/v1/nowhere", "")
	e.expectError(resp, body, http.StatusNotFound, codeRouteNotFound)
	resp, body = e.do("GET", "/nowhere", "") // "/" is the web page (page_test.go)
	e.expectError(resp, body, http.StatusNotFound, codeRouteNotFound)

	resp, body = e.do("DELETE", "/v1/workspaces", "")
	e.expectError(resp, body, http.StatusMethodNotAllowed, codeMethodNotAllowed)
	if allow := resp.Header.Get("Allow"); allow != "GET, HEAD, POST" {
		t.Fatalf("Allow %q", allow)
	}
	resp, body = e.do("GET", "/v1/workspaces/ws_x/pause", "")
	e.expectError(resp, body, http.StatusMethodNotAllowed, codeMethodNotAllowed)
	resp, body = e.do("POST", "/healthz", "{}")
	e.expectError(resp, body, http.StatusMethodNotAllowed, codeMethodNotAllowed)

	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/workspaces/ws_nope", ""},
		{"POST", "/v1/workspaces/ws_nope/pause", ""},
		{"POST", "/v1/workspaces/ws_nope/resume", "{}"},
		{"POST", "/v1/workspaces/ws_nope/delete-preview", ""},
		{"POST", "/v1/workspaces/ws_nope/delete", `{"token":"abc"}`},
		{"PUT", "/v1/workspaces/ws_nope/keep", `{"keep":true}`},
		{"GET", "/v1/accounts/acc_nope", ""},
		{"DELETE", "/v1/accounts/acc_nope", ""},
		{"POST", "/v1/workspaces", `{"account_id":"acc_nope","name":"x"}`},
	} {
		resp, body := e.do(r.method, r.path, r.body)
		e.expectError(resp, body, http.StatusNotFound, "not_found")
	}
}

func TestInvalidRequests(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.save(testWorkspace("kept"))
	for _, r := range []struct{ method, path, body, mention string }{
		{"POST", "/v1/workspaces", `{"name":"x"}`, "account_id"},
		{"POST", "/v1/workspaces", `{"account_id":"acc_x","name":"x","lifecycle":{"idle_pause_after_seconds":-1}}`, "idle_pause_after_seconds"},
		{"POST", "/v1/workspaces", `{"account_id":"acc_x","name":"x","lifecycle":{"paused_ttl_seconds":99999999999999}}`, "paused_ttl_seconds"},
		{"POST", "/v1/accounts", `{"label":"x"}`, "provider"},
		{"POST", "/v1/accounts", `{"provider":"daytona"}`, "unknown provider"},
		{"POST", "/v1/workspaces/" + ws.ID + "/delete", `{}`, "confirmation token"},
		{"PUT", "/v1/workspaces/" + ws.ID + "/keep", `{}`, "keep"},
	} {
		resp, body := e.do(r.method, r.path, r.body)
		d := e.expectError(resp, body, http.StatusBadRequest, "invalid")
		if !strings.Contains(d.Message, r.mention) {
			t.Errorf("%s %s: message %q does not mention %q", r.method, r.path, d.Message, r.mention)
		}
	}
}

func TestProviderUnavailable(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	// An account whose provider is not installed (a Wasm module removed,
	// say): core reports it unavailable.
	if _, err := e.svc.EnsureAccount(ctx, core.Account{ID: "acc_gone", Provider: "gone", Label: "gone"}); err != nil {
		t.Fatal(err)
	}
	resp, body := e.do("POST", "/v1/workspaces", `{"account_id":"acc_gone","name":"x"}`)
	d := e.expectError(resp, body, http.StatusServiceUnavailable, "unavailable")
	if !strings.Contains(d.Message, "gone") {
		t.Fatalf("message %q does not name the provider", d.Message)
	}
	ws := testWorkspace("orphan")
	ws.AccountID, ws.Provider = "acc_gone", "gone"
	ws = e.save(ws)
	resp, body = e.do("POST", "/v1/workspaces/"+ws.ID+"/pause", "")
	e.expectError(resp, body, http.StatusServiceUnavailable, "unavailable")
	if len(e.svc.Workspaces("")) != 1 {
		t.Fatal("a refused create left a workspace behind")
	}

	resp, body = e.do("GET", "/v1/providers", "")
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != `{"deletion_guard":{"runs":false,"margin_seconds":3600,"exports":false},"providers":[]}` {
		t.Fatalf("providers: %d %s", resp.StatusCode, body)
	}
}

// wireKeys is every key a workspace object may carry; alwaysKeys are the
// ones it always carries (the others are left out when null, false, 0 or
// "": API.md, "Omitted fields").
var (
	wireKeys = []string{"id", "name", "provider", "account_id", "state", "box_id", "box_url", "adopted",
		"paused_at", "stop_reason", "exit_code", "size_bytes", "size_source", "size_at", "last_activity_at", "keep", "delete_after",
		"lifecycle", "progress", "error", "created_at", "updated_at", "rev"}
	alwaysKeys = []string{"id", "name", "provider", "account_id", "state", "created_at", "updated_at", "rev"}
)

// checkWireKeys checks raw carries only known keys, the always-present
// ones among them, and no null, false, 0 or "" value.
func checkWireKeys(t *testing.T, raw json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range m {
		if !slices.Contains(wireKeys, k) {
			t.Fatalf("unknown workspace key %q in %s", k, raw)
		}
		switch string(v) {
		case "null", "false", "0", `""`, "{}":
			t.Fatalf("workspace key %q carries %s, which should be omitted: %s", k, v, raw)
		}
	}
	for _, k := range alwaysKeys {
		if _, ok := m[k]; !ok {
			t.Fatalf("workspace without %q: %s", k, raw)
		}
	}
	return m
}

func TestWorkspaceJSON(t *testing.T) {
	e := newEnv(t, nil)
	paused := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	full := testWorkspace("full")
	full.State = core.StatePaused
	full.BoxURL = "http://127.0.0.1:9999"
	full.Adopted = true
	full.PausedAt = paused
	full.LastActivityAt = paused.Add(-time.Hour)
	full.Size = &core.Size{Bytes: 12345, Source: core.SizeDockerEngineUsed, At: paused}
	full.Lifecycle = core.Lifecycle{IdlePauseAfter: 30 * time.Minute, PausedTTL: 7 * 24 * time.Hour}
	full.Options = map[string]string{"secret-ish": "not on the wire"}
	full.Error = "pause failed: boom"
	full.Progress = "pulling image x: 1 of 2 layers done"
	full.StopReason = core.StopOutside
	full.ExitCode = new(int)
	*full.ExitCode = 143
	full = e.save(full)
	bare := e.save(testWorkspace("bare"))

	resp, body := e.do("GET", "/v1/workspaces/"+full.ID, "")
	if resp.StatusCode != 200 {
		t.Fatalf("get: %d %s", resp.StatusCode, body)
	}
	got := decode[map[string]json.RawMessage](t, body)
	m := checkWireKeys(t, got["workspace"])
	for _, k := range wireKeys {
		if _, ok := m[k]; !ok && k != "keep" && k != "delete_after" {
			t.Errorf("a workspace with every field set lacks %q", k)
		}
	}
	for k, want := range map[string]string{
		"state":            `"paused"`,
		"paused_at":        `"2025-03-01T11:00:00.123Z"`,
		"last_activity_at": `"2025-03-01T10:00:00.123Z"`,
		"size_bytes":       `12345`,
		"size_source":      `"docker_engine:used"`,
		"size_at":          `"2025-03-01T11:00:00.123Z"`,
		"lifecycle":        `{"idle_pause_after_seconds":1800,"paused_ttl_seconds":604800}`,
		"adopted":          `true`,
		"error":            `"pause failed: boom"`,
		"progress":         `"pulling image x: 1 of 2 layers done"`,
		"rev":              fmt.Sprint(full.Rev),
		"stop_reason":      `"outside"`,
		"exit_code":        `143`,
	} {
		if string(m[k]) != want {
			t.Errorf("%s = %s, want %s", k, m[k], want)
		}
	}
	if strings.Contains(string(body), "not on the wire") {
		t.Error("options leaked onto the wire")
	}

	_, body = e.do("GET", "/v1/workspaces/"+bare.ID, "")
	m = checkWireKeys(t, decode[map[string]json.RawMessage](t, body)["workspace"])
	for _, k := range []string{"paused_at", "stop_reason", "exit_code", "size_bytes", "size_source", "size_at", "last_activity_at", "delete_after",
		"box_url", "adopted", "keep", "lifecycle", "progress", "error"} {
		if v, ok := m[k]; ok {
			t.Errorf("%s = %s, want it omitted", k, v)
		}
	}
	// Omitted fields decode to their zero values.
	var bw Workspace
	if err := json.Unmarshal(decode[map[string]json.RawMessage](t, body)["workspace"], &bw); err != nil || bw.PausedAt != nil || bw.Error != "" || bw.Keep || bw.Lifecycle != (Lifecycle{}) || bw.ID != bare.ID {
		t.Errorf("bare workspace decodes to %+v (%v)", bw, err)
	}

	// The list answers from the stream cache, newest first, at the feed's
	// current revision.
	_, body = e.do("GET", "/v1/workspaces", "")
	var list struct {
		Rev        int64             `json:"rev"`
		ServerTime time.Time         `json:"server_time"`
		Workspaces []json.RawMessage `json:"workspaces"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("list: %v: %s", err, body)
	}
	if list.Rev != e.svc.Feed().Rev() || len(list.Workspaces) != 2 || time.Since(list.ServerTime) > time.Minute {
		t.Fatalf("list rev %d (feed %d), %d workspaces, server_time %v", list.Rev, e.svc.Feed().Rev(), len(list.Workspaces), list.ServerTime)
	}
	first := checkWireKeys(t, list.Workspaces[0])
	if string(first["id"]) != `"`+bare.ID+`"` {
		t.Fatalf("list order: first is %s, want the newest %s", first["id"], bare.ID)
	}

	// keep, without a provider involved.
	resp, body = e.do("PUT", "/v1/workspaces/"+bare.ID+"/keep", `{"keep":true}`)
	if resp.StatusCode != 200 || !decode[map[string]Workspace](t, body)["workspace"].Keep {
		t.Fatalf("keep: %d %s", resp.StatusCode, body)
	}
	if ws, _ := e.svc.Workspace("", bare.ID); !ws.Keep {
		t.Fatal("keep was not recorded")
	}
}

func TestAccounts(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	if _, err := e.svc.EnsureAccount(ctx, core.Account{ID: "acc_local", Provider: "docker", Label: "Local Docker"}); err != nil {
		t.Fatal(err)
	}
	ws := testWorkspace("a")
	ws.AccountID = "acc_local"
	ws = e.save(ws)

	resp, body := e.do("GET", "/v1/accounts", "")
	var got struct {
		Accounts []json.RawMessage `json:"accounts"`
	}
	if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != 200 || len(got.Accounts) != 1 {
		t.Fatalf("accounts: %d %s", resp.StatusCode, body)
	}
	a := decode[map[string]json.RawMessage](t, got.Accounts[0])
	if string(a["id"]) != `"acc_local"` || string(a["config"]) != `{}` || string(a["credentials"]) != `[]` || a["created_at"] == nil {
		t.Fatalf("account JSON %s", got.Accounts[0])
	}

	c := e.mustDial("")
	readMsg(t, c)
	resp, body = e.do("DELETE", "/v1/accounts/acc_local", "")
	if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
		t.Fatalf("delete account: %d %s", resp.StatusCode, body)
	}
	if m := readMsg(t, c); m.Type != "remove" || m.ID != ws.ID {
		t.Fatalf("after removing the account: %+v, want remove of %s", m, ws.ID)
	}
	resp, body = e.do("DELETE", "/v1/accounts/acc_local", "")
	e.expectError(resp, body, http.StatusNotFound, "not_found")
}

func TestErrorTranslation(t *testing.T) {
	logs := &syncBuffer{}
	s := &Server{log: slogTo(logs)}
	secret := "sk-live-do-not-show"
	cases := []struct {
		err        error
		status     int
		code       string
		state      string
		retryAfter string
	}{
		{core.Errorf(core.KindNotFound, "workspace x not found"), 404, "not_found", "", ""},
		{&core.Error{Kind: core.KindConflict, Message: "cannot pause", State: core.StatePaused}, 409, "conflict", "paused", ""},
		{core.Errorf(core.KindInvalid, "bad"), 400, "invalid", "", ""},
		{&core.Error{Kind: core.KindRateLimited, Message: "slow down", RetryAfter: 1500 * time.Millisecond}, 429, "rate_limited", "", "2"},
		{&core.Error{Kind: core.KindRateLimited, Message: "slow down"}, 429, "rate_limited", "", "1"},
		{&core.Error{Kind: core.KindUnavailable, Message: "docker is not running", RetryAfter: 30 * time.Second}, 503, "unavailable", "", "30"},
		{core.Errorf(core.KindUnavailable, "docker is not running"), 503, "unavailable", "", ""},
		{core.Errorf(core.KindUnauthorized, "daytona refused the token"), 502, codeProviderUnauthorized, "", ""},
		{fmt.Errorf("wrapped: %w", core.Errorf(core.KindNotFound, "gone")), 404, "not_found", "", ""},
		{errors.New("sql: database is locked " + secret), 500, codeInternal, "", ""},
		{&core.Error{Kind: core.KindInternal, Message: "boom " + secret}, 500, codeInternal, "", ""},
		{&core.Error{Kind: core.KindInvalid, Err: errors.New(secret)}, 400, "invalid", "", ""},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		s.writeError(rec, httptest.NewRequest("POST", "/v1/x", nil), c.err)
		var er ErrorResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &er); err != nil {
			t.Fatal(err)
		}
		if rec.Code != c.status || er.Error.Code != c.code || er.Error.State != c.state || rec.Header().Get("Retry-After") != c.retryAfter {
			t.Errorf("%v: %d %+v Retry-After %q; want %d %s state %q Retry-After %q", c.err, rec.Code, er.Error, rec.Header().Get("Retry-After"), c.status, c.code, c.state, c.retryAfter)
		}
		if strings.Contains(rec.Body.String(), secret) {
			t.Errorf("%v: the answer shows internal detail: %s", c.err, rec.Body.String())
		}
		if c.status == 500 && !strings.Contains(er.Error.Message, "ref ") {
			t.Errorf("internal error without a log reference: %q", er.Error.Message)
		}
	}
	if !strings.Contains(logs.String(), "database is locked") {
		t.Error("the internal error's detail is not in the log")
	}
}
