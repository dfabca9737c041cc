package e2e

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// TestAccountLocation: the Location a POST /v1/accounts answers names the
// account: GET there reads it back as GET /v1/accounts lists it, in the
// desktop and in serve, where another user gets 404 as for the account's
// other routes.
func TestAccountLocation(t *testing.T) {
	dt := daytona.New(daytona.Options{Token: cloudToken, Clock: emulator.NewWallClock(), Delays: &daytona.Delays{}})
	api := httptest.NewServer(dt.Handler())
	t.Cleanup(func() { dt.Close(); api.Close() })
	apiURL := api.URL + "/api"
	body := map[string]any{"provider": "daytona", "label": "work",
		"config": map[string]string{"api_url": apiURL}, "credentials": map[string]string{"token": cloudToken}}

	t.Run("desktop", func(t *testing.T) {
		p := start(t, options{dataDir: t.TempDir()})
		c := newWebClient(t, p.ready.URL)
		c.bearer = p.ready.Token
		readBack(t, c, body)
	})

	t.Run("serve", func(t *testing.T) {
		data := t.TempDir()
		addUser(t, data, "alice", "alice-password-1")
		addUser(t, data, "bob", "bob-password-22")
		p := start(t, options{mode: "serve", dataDir: data, args: []string{"--auth", "local", "--docker-scope", "unused"}})
		alice, bob := newWebClient(t, p.ready.URL), newWebClient(t, p.ready.URL)
		alice.login("alice", "alice-password-1")
		bob.login("bob", "bob-password-22")
		loc := readBack(t, alice, body)
		if code, raw, _ := bob.do("GET", loc, nil, nil); code != 404 || !strings.Contains(string(raw), `"not_found"`) {
			t.Fatalf("bob GET %s: %d %s, want 404 not_found", loc, code, raw)
		}
	})
}

// readBack adds the account as c, follows the answer's Location and checks
// that the account read there is the one added and the one listed (its
// status aside, which the reconciler may move on between reads). It
// returns the Location; an unknown id there is 404.
func readBack(t *testing.T, c *webClient, body map[string]any) string {
	t.Helper()
	var added struct{ Account map[string]any }
	code, raw, hdr := c.do("POST", "/v1/accounts", body, &added)
	if code != 201 {
		t.Fatalf("POST /v1/accounts: %d %s", code, raw)
	}
	id, _ := added.Account["id"].(string)
	loc := hdr.Get("Location")
	if id == "" || loc != "/v1/accounts/"+id {
		t.Fatalf("Location %q for account %q", loc, id)
	}
	var got struct{ Account map[string]any }
	c.must(200, "GET", loc, nil, &got)
	var list struct{ Accounts []map[string]any }
	c.must(200, "GET", "/v1/accounts", nil, &list)
	var listed map[string]any
	for _, a := range list.Accounts {
		if a["id"] == id {
			listed = a
		}
	}
	if listed == nil {
		t.Fatalf("GET /v1/accounts lacks %s", id)
	}
	for name, want := range map[string]map[string]any{"the POST's answer": added.Account, "the list's entry": listed} {
		if a, b := withoutStatus(t, got.Account), withoutStatus(t, want); a != b {
			t.Errorf("GET %s:\n%s\nwant %s:\n%s", loc, a, name, b)
		}
	}
	if _, ok := got.Account["status"].(map[string]any); !ok {
		t.Errorf("GET %s has no status: %v", loc, got.Account)
	}
	c.must(404, "GET", "/v1/accounts/acc_doesnotexist", nil, nil)
	return loc
}

// withoutStatus is an account's JSON without its status.
func withoutStatus(t *testing.T, a map[string]any) string {
	t.Helper()
	c := make(map[string]any, len(a))
	for k, v := range a {
		if k != "status" {
			c[k] = v
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
