package uibridge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"
)

// GET /metrics is for admins (sessions or full tokens) and for API tokens
// with the metrics scope, which may read nothing else; anyone else gets
// 401 (no credential) or 403.
func TestMetricsGate(t *testing.T) {
	st := openStore(t)
	var login *Login
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("companion_up 1\n")) })
	e := newEnvWith(t, st, &core.Registry{}, func(c *Config) {
		login = &Login{Auth: auth.New(auth.Config{Store: st, Params: auth.Params{MemoryKiB: 64, Time: 1, Threads: 1}}), Local: true}
		c.Login = login
		c.Token = ""
		c.Metrics = metrics
	})
	ctx := context.Background()
	admin, err := login.Auth.AddLocalUser(ctx, "root", "root-password", true)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := login.Auth.AddLocalUser(ctx, "bob", "bob-password", false)
	if err != nil {
		t.Fatal(err)
	}
	token := func(u auth.User, scope string) string {
		secret, _, err := login.Auth.CreateScopedToken(ctx, u.ID, "", scope, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return secret
	}
	if _, _, err := login.Auth.CreateScopedToken(ctx, bob.ID, "", "everything", time.Hour); !core.IsKind(err, core.KindInvalid) {
		t.Errorf("a token of an unknown scope: %v, want invalid", err)
	}
	adminTok, bobTok, scraper := token(admin, ""), token(bob, ""), token(bob, auth.ScopeMetrics)
	for _, c := range []struct {
		name, token, path string
		want              int
	}{
		{"no credential", "", MetricsPath, 401},
		{"a user's full token", bobTok, MetricsPath, 403},
		{"an admin's token", adminTok, MetricsPath, 200},
		{"a metrics-scope token", scraper, MetricsPath, 200},
		{"a metrics-scope token on the API", scraper, "/v1/workspaces", 403},
		{"a user's full token on the API", bobTok, "/v1/workspaces", 200},
	} {
		e.token = c.token
		resp, body := e.do("GET", c.path, "")
		if resp.StatusCode != c.want {
			t.Errorf("%s: GET %s = %d %s, want %d", c.name, c.path, resp.StatusCode, body, c.want)
		}
	}
	e.token = adminTok
	if resp, _ := e.do("POST", MetricsPath, ""); resp.StatusCode != 405 {
		t.Errorf("POST /metrics = %d, want 405", resp.StatusCode)
	}
	// Over the API only an admin makes a metrics-scope token.
	e.token = bobTok
	if resp, body := e.do("POST", "/v1/tokens", `{"scope":"metrics"}`); resp.StatusCode != 403 {
		t.Errorf("a user's POST /v1/tokens scope metrics = %d %s, want 403", resp.StatusCode, body)
	}
	e.token = adminTok
	resp, body := e.do("POST", "/v1/tokens", `{"scope":"metrics"}`)
	if resp.StatusCode != 201 {
		t.Fatalf("an admin's POST /v1/tokens scope metrics = %d %s, want 201", resp.StatusCode, body)
	}
	made := decode[struct {
		Token string
		Info  APIToken
	}](t, body)
	if made.Info.Scope != auth.ScopeMetrics {
		t.Errorf("the token's info = %+v, want scope metrics", made.Info)
	}
	e.token = made.Token
	if resp, _ := e.do("GET", MetricsPath, ""); resp.StatusCode != 200 {
		t.Errorf("GET /metrics with the admin's metrics-scope token = %d, want 200", resp.StatusCode)
	}
	if resp, _ := e.do("GET", "/v1/me", ""); resp.StatusCode != 403 {
		t.Errorf("GET /v1/me with the admin's metrics-scope token = %d, want 403 (an admin's metrics token is no admin)", resp.StatusCode)
	}
}

// routeWriter is a RouteSetter under a writer that unwraps to it.
type routeWriter struct {
	http.ResponseWriter
	route string
}

func (w *routeWriter) SetRoute(p string) { w.route = p }

type wrapped struct{ http.ResponseWriter }

func (w wrapped) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// The RouteSetter under the writer (looked for through Unwrap) hears the
// pattern that served a request, never its path, and nothing for a
// request the gate refused or no route served.
func TestRouteSetter(t *testing.T) {
	e := newEnv(t, nil)
	var got []string
	for _, c := range []struct{ path, token string }{{"/v1/workspaces/ws_123", testToken}, {"/v1/workspaces", testToken}, {"/v1/workspaces", "wrong"}, {"/v1/nowhere", testToken}} {
		req, _ := http.NewRequest("GET", e.base+c.path, nil)
		req.Host = "127.0.0.1:" + strconv.Itoa(e.port)
		req.Header.Set("Authorization", "Bearer "+c.token)
		rw := &routeWriter{ResponseWriter: httptest.NewRecorder()}
		e.srv.Handler().ServeHTTP(wrapped{rw}, req)
		got = append(got, rw.route)
	}
	want := []string{"/v1/workspaces/{id}", "/v1/workspaces", "", ""}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("routes %q, want %q", got, want)
	}
}
