package uibridge

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/canvasapp/companion/core"
)

// TestGetAccount: GET /v1/accounts/{id} answers the account exactly as
// GET /v1/accounts lists it, for its owner and, when shared, for anyone;
// another user's own account and an unknown id are 404 not_found, as for
// PATCH and DELETE.
func TestGetAccount(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Authenticators = []Authenticator{headerAuth{}} })
	ctx := context.Background()
	as := func(user string) []string { return []string{"Authorization", "", "X-Test-User", user} }
	for _, a := range []core.Account{
		{ID: "acc_alice", Owner: "alice", Provider: "docker", Label: "Alice's", Config: map[string]string{"k": "v"}},
		{ID: "acc_bob", Owner: "bob", Provider: "docker", Label: "Bob's"},
		{ID: "acc_shared", Owner: "admin", Provider: "docker", Label: "Everyone's", Shared: true},
	} {
		if _, err := e.svc.EnsureAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
	}

	listed := func(user string) map[string]string {
		t.Helper()
		resp, body := e.do("GET", "/v1/accounts", "", as(user)...)
		var got struct {
			Accounts []json.RawMessage `json:"accounts"`
		}
		if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/accounts as %s: %d %s", user, resp.StatusCode, body)
		}
		out := map[string]string{}
		for _, raw := range got.Accounts {
			var a struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(raw, &a); err != nil {
				t.Fatal(err)
			}
			out[a.ID] = string(raw)
		}
		return out
	}
	one := func(user, id string) string {
		t.Helper()
		resp, body := e.do("GET", "/v1/accounts/"+id, "", as(user)...)
		var got struct {
			Account json.RawMessage `json:"account"`
		}
		if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/accounts/%s as %s: %d %s", id, user, resp.StatusCode, body)
		}
		return string(got.Account)
	}

	for _, user := range []string{"alice", "bob"} {
		list := listed(user)
		if len(list) != 2 {
			t.Fatalf("%s lists %d accounts, want own and shared: %v", user, len(list), list)
		}
		for id, want := range list {
			if got := one(user, id); got != want {
				t.Errorf("GET /v1/accounts/%s as %s:\n%s\nwant the list's entry\n%s", id, user, got, want)
			}
		}
	}

	for _, r := range []struct{ user, id string }{
		{"bob", "acc_alice"},
		{"alice", "acc_bob"},
		{"alice", "acc_nope"},
	} {
		resp, body := e.do("GET", "/v1/accounts/"+r.id, "", as(r.user)...)
		e.expectError(resp, body, http.StatusNotFound, "not_found")
	}
}
