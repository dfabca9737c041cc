package uibridge

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/core"
)

// pausedProvider reports every box paused; retention's warnings need
// nothing more from it.
type pausedProvider struct{ inventingProvider }

func (*pausedProvider) Describe(context.Context) (core.ProviderInfo, error) {
	return core.ProviderInfo{Name: "still", Version: "1", Kind: "builtin", Capabilities: core.Capabilities{Suspend: true, Delete: true}}, nil
}

func (*pausedProvider) List(context.Context, core.Account) ([]core.Box, error) { return nil, nil }

// TestRetentionNoticeGoesToItsOwner: in serve mode (scheduled deletion
// on) with two users, a retention_warning notice reaches the stream of the
// workspace's owner only, carrying the workspace id and its delete_after;
// the schedule itself arrives as an upsert with delete_after first.
func TestRetentionNoticeGoesToItsOwner(t *testing.T) {
	ctx := context.Background()
	reg := &core.Registry{}
	reg.Register("still", &pausedProvider{})
	svc, err := core.NewService(ctx, core.Config{Store: openStore(t), Providers: reg, ScheduledDeletion: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv, err := New(Config{Service: svc, Token: testToken, AllowedHosts: LoopbackHosts(port), Version: "test",
		Authenticators: []Authenticator{headerAuth{}}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() { srv.Close(); hs.Close(); svc.Close(ctx) })

	pausedAt := time.Now().UTC().Add(-time.Hour)
	for _, user := range []string{"alice", "bob"} {
		if _, err := svc.EnsureAccount(ctx, core.Account{ID: "acc_" + user, Owner: user, Provider: "still", Label: user}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Feed().Save(ctx, core.Workspace{ID: "ws_" + user, Owner: user, Name: user, AccountID: "acc_" + user,
			Provider: "still", State: core.StatePaused, BoxID: "box_" + user, PausedAt: pausedAt, StopReason: core.StopCompanion, CreatedAt: pausedAt}); err != nil {
			t.Fatal(err)
		}
	}
	dial := func(user string) *websocket.Conn {
		c, _, err := wsDial(ctx, "ws://127.0.0.1:"+strconv.Itoa(port)+"/v1/ws",
			&dialOptions{Subprotocols: []string{Subprotocol}, HTTPHeader: http.Header{"X-Test-User": {user}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if m := readMsg(t, c); m.Type != "snapshot" {
			t.Fatalf("%s: first message %+v", user, m)
		}
		return c
	}
	alice, bob := dial("alice"), dial("bob")

	if _, err := svc.SetRetentionPolicy(ctx, "alice", core.RetentionPolicy{AccountID: "acc_alice", Enabled: true,
		PausedFor: 2 * time.Hour, WarnBefore: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if m := readMsg(t, alice); m.Type != "upsert" || m.Workspace.DeleteAfter == nil || !m.Workspace.DeleteAfter.Equal(wireTime(pausedAt.Add(2*time.Hour))) {
		t.Fatalf("alice's schedule %+v", m)
	}
	if rep := svc.RetentionTick(ctx, core.RetentionConfig{}); rep.Warned != 1 || rep.Err != nil {
		t.Fatalf("tick %+v", rep)
	}
	alice.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, raw, err := alice.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var n struct {
		Type        string     `json:"type"`
		Kind        string     `json:"kind"`
		WorkspaceID string     `json:"workspace_id"`
		ServerTime  *time.Time `json:"server_time"`
		DeleteAfter *time.Time `json:"delete_after"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		t.Fatal(err)
	}
	if n.Type != "notice" || n.Kind != "retention_warning" || n.WorkspaceID != "ws_alice" || n.ServerTime == nil ||
		n.DeleteAfter == nil || !n.DeleteAfter.Equal(wireTime(pausedAt.Add(2*time.Hour))) {
		t.Fatalf("alice's notice %s", raw)
	}

	// Bob's next message is his own change, not alice's notice.
	if _, err := svc.SetKeep(ctx, "bob", "ws_bob", true); err != nil {
		t.Fatal(err)
	}
	if m := readMsg(t, bob); m.Type != "upsert" || m.Workspace.ID != "ws_bob" {
		t.Fatalf("bob got %+v; want only his own upsert", m)
	}
}
