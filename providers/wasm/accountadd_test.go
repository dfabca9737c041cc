package wasm

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	uibridge "github.com/canvasapp/companion/ui-bridge"
)

// Adding an account at a module whose describe contradicts its manifest
// (a module loaded without install's check, as first-party modules are)
// is answered over HTTP with a named error, not 500 internal: the real
// core service, store, HTTP server and module.
func TestAccountAddNamesModuleFailure(t *testing.T) {
	e := newEnv(t)
	lying := e.load(t, watModule(t, "lying_describe", func(m map[string]any) {
		m["credentials"] = []any{}
		m["upstreams"] = map[string]any{"api": map[string]any{"base_url": "https://api.test.example"}}
		m["config"] = []any{}
	}))
	reg := &core.Registry{}
	reg.Register(lying.Name(), lying)
	ctx := context.Background()
	svc, err := core.NewService(ctx, core.Config{Store: e.pins, Providers: reg, Logger: e.host.log})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	const token = "test-token-0123456789abcdef"
	srv, err := uibridge.New(uibridge.Config{Service: svc, Token: token, AllowedHosts: uibridge.LoopbackHosts(port), Version: "test", Logger: e.host.log})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		svc.Close(cctx)
	})

	req, _ := http.NewRequest("POST", "http://127.0.0.1:"+strconv.Itoa(port)+"/v1/accounts", strings.NewReader(`{"provider":"lying-describe","label":"x"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct {
			Code, Message, Module, Operation, Field string
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	d := body.Error
	if resp.StatusCode != 502 || d.Code != "provider_module_failed" || d.Module != "lying-describe" || d.Operation != "describe" || d.Field != "version" || !strings.Contains(d.Message, `"6.6.6"`) {
		t.Fatalf("account add answered %d %+v", resp.StatusCode, d)
	}
	if accts, err := svc.Accounts(ctx, ""); err == nil && len(accts) != 0 {
		t.Fatalf("account stored: %+v", accts)
	}
}
