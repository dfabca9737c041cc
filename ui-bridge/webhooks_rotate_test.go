package uibridge

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/secrets"
	"github.com/canvasapp/companion/webhooks"
)

// TestRotateWebhookSecretRoute: with sign-in, POST
// /v1/webhooks/{id}/rotate-secret answers another user's webhook 404,
// refuses a bad previous_valid_for with 400 and a message naming it (the
// secret unchanged), and otherwise returns a new secret once, with the
// old one's expiry (24 h by default, none for 0), which the list shows too.
func TestRotateWebhookSecretRoute(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	now := time.Date(2026, 7, 8, 9, 10, 11, 0, time.UTC)
	k, err := secrets.ParseKey(secrets.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	inst, _ := st.InstanceID(ctx)
	keys, err := secrets.OpenSealed(ctx, st, inst, k)
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := webhooks.New(webhooks.Config{Store: st, Secrets: keys, AllowPrivate: true, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	var login *Login
	e := newEnvWith(t, st, &core.Registry{}, func(c *Config) {
		login = &Login{Auth: auth.New(auth.Config{Store: st, Params: auth.Params{MemoryKiB: 64, Time: 1, Threads: 1}}), Local: true}
		c.Login, c.Token, c.Webhooks = login, "", hooks
	})
	cookies := map[string]string{}
	for _, u := range []string{"alice", "bob"} {
		if _, err := login.Auth.AddLocalUser(ctx, u, u+"-password", false); err != nil {
			t.Fatal(err)
		}
		resp, body := e.do("POST", "/v1/login", `{"name":"`+u+`","password":"`+u+`-password"}`)
		if resp.StatusCode != 200 {
			t.Fatalf("login %s: %d %s", u, resp.StatusCode, body)
		}
		cookies[u] = strings.Split(resp.Header.Get("Set-Cookie"), ";")[0]
	}
	as := func(user, method, path, body string) (*http.Response, []byte) {
		t.Helper()
		return e.do(method, path, body, "Authorization", "", "Cookie", cookies[user], "Origin", e.base)
	}
	type answer struct {
		Webhook Webhook `json:"webhook"`
		Secret  string  `json:"secret"`
	}
	resp, body := as("alice", "POST", "/v1/webhooks", `{"url":"http://127.0.0.1:9/h","events":["delete.done"]}`)
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	created := decode[answer](t, body)
	if created.Webhook.PreviousSecretExpiresAt != nil {
		t.Fatalf("a new webhook has a previous secret: %s", body)
	}
	id := created.Webhook.ID
	rotate := "/v1/webhooks/" + id + "/rotate-secret"
	secretIs := func(want string) {
		t.Helper()
		if got, err := keys.Get(ctx, webhooks.SecretKey(id)); err != nil || got != want {
			t.Fatalf("the secret changed (%v)", err)
		}
	}

	resp, body = as("bob", "POST", rotate, `{"previous_valid_for":0}`)
	e.expectError(resp, body, 404, string(core.KindNotFound))
	resp, body = as("alice", "POST", "/v1/webhooks/wh_nobody/rotate-secret", "")
	e.expectError(resp, body, 404, string(core.KindNotFound))
	for _, bad := range []struct{ body, code, says string }{
		{`{"previous_valid_for":-1}`, string(core.KindInvalid), "previous_valid_for must be a number of seconds from 0"},
		{`{"previous_valid_for":604801}`, string(core.KindInvalid), "604800 (7 days)"},
		{`{"previous_valid_for":1e30}`, codeInvalidJSON, `"previous_valid_for"`},
		{`{"previous_valid_for":"1h"}`, codeInvalidJSON, `"previous_valid_for"`},
		{`{"previous_valid_for":1.5}`, codeInvalidJSON, `"previous_valid_for"`},
		{`{"grace":60}`, codeInvalidJSON, `unknown field "grace"`},
	} {
		resp, body := as("alice", "POST", rotate, bad.body)
		if d := e.expectError(resp, body, 400, bad.code); !strings.Contains(d.Message, bad.says) {
			t.Errorf("%s: message %q; want it to say %q", bad.body, d.Message, bad.says)
		}
	}
	secretIs(created.Secret)

	list := func() *time.Time {
		t.Helper()
		resp, body := as("alice", "GET", "/v1/webhooks", "")
		var l struct{ Webhooks []Webhook }
		if err := json.Unmarshal(body, &l); resp.StatusCode != 200 || err != nil || len(l.Webhooks) != 1 {
			t.Fatalf("list: %d %s", resp.StatusCode, body)
		}
		return l.Webhooks[0].PreviousSecretExpiresAt
	}
	last := created.Secret
	for _, c := range []struct {
		body  string
		grace time.Duration // 0: no previous secret
	}{
		{"", 24 * time.Hour},
		{`{"previous_valid_for":0}`, 0},
		{`{}`, 24 * time.Hour},
		{`{"previous_valid_for":3600}`, time.Hour},
		{`{"previous_valid_for":604800}`, 7 * 24 * time.Hour},
	} {
		resp, body := as("alice", "POST", rotate, c.body)
		if resp.StatusCode != 200 {
			t.Fatalf("rotate %q: %d %s", c.body, resp.StatusCode, body)
		}
		got := decode[answer](t, body)
		if got.Webhook.ID != id || !strings.HasPrefix(got.Secret, "whsec_") || got.Secret == last {
			t.Fatalf("rotate %q: %s; want the webhook and a new secret", c.body, body)
		}
		secretIs(got.Secret)
		listed := list()
		if c.grace == 0 {
			if got.Webhook.PreviousSecretExpiresAt != nil || listed != nil {
				t.Fatalf("rotate %q: previous secret until %v (listed %v); want none", c.body, got.Webhook.PreviousSecretExpiresAt, listed)
			}
		} else if want := now.Add(c.grace); got.Webhook.PreviousSecretExpiresAt == nil || !got.Webhook.PreviousSecretExpiresAt.Equal(want) || listed == nil || !listed.Equal(want) {
			t.Fatalf("rotate %q: previous secret until %v (listed %v); want %v", c.body, got.Webhook.PreviousSecretExpiresAt, listed, want)
		}
		if _, body := as("alice", "GET", "/v1/webhooks", ""); strings.Contains(string(body), got.Secret) || strings.Contains(string(body), last) {
			t.Fatal("the list shows a secret")
		}
		last = got.Secret
	}
}
