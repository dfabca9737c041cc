package main

import (
	"strings"
	"testing"

	"github.com/canvasapp/companion/providers/wasm/sdk"
)

func TestBoxIDs(t *testing.T) {
	a, b := sdk.Account{ID: "acc_1"}, sdk.Account{ID: "acc_2"}
	id, err := boxID(a, "ws_9c1")
	if err != nil || !idRE.MatchString(id) {
		t.Fatalf("boxID: %q %v", id, err)
	}
	if ws, ok := workspaceOf(a, id); !ok || ws != "ws_9c1" {
		t.Fatalf("workspaceOf(%q) = %q %v", id, ws, ok)
	}
	if _, ok := workspaceOf(b, id); ok {
		t.Fatal("another account claims the sandbox")
	}
	for _, bad := range []string{"", "abc", id + "a", strings.ToUpper(id), id[:len(id)-1] + "1"} {
		if ws, ok := workspaceOf(a, bad); ok {
			t.Errorf("workspaceOf(%q) = %q, true", bad, ws)
		}
	}
	if _, ok := workspaceOf(sdk.Account{}, id); ok {
		t.Error("an account without id claims sandboxes")
	}
	if _, err := boxID(a, strings.Repeat("w", 80)); err == nil {
		t.Error("an id past 128 characters was made")
	}
}

func TestStartScript(t *testing.T) {
	s, err := startScript("agent --port 8000", "k-1_2.3~")
	if err != nil || !strings.Contains(s, "OH_SESSION_API_KEYS_0='k-1_2.3~' nohup agent --port 8000 ") || !strings.Contains(s, pidFile) {
		t.Fatalf("script %q %v", s, err)
	}
	if s, _ := startScript("agent", ""); strings.Contains(s, "OH_SESSION_API_KEYS_0") {
		t.Fatalf("a key-less script sets a key: %q", s)
	}
	for _, c := range []struct{ cmd, key string }{{"a'b", "k"}, {"a\nb", "k"}, {"a", "k'; rm -rf /"}, {"a", "k k"}} {
		if _, err := startScript(c.cmd, c.key); err == nil {
			t.Errorf("startScript(%q, %q) accepted", c.cmd, c.key)
		}
	}
}

func TestParseEvents(t *testing.T) {
	res, err := parseEvents("s", []byte("event: stdout\ndata: aGk=\n\n: comment\n\nevent: stderr\ndata: b29wcw==\n\nevent: exit\ndata: {\"exit_code\":3}\n\n"))
	if err != nil || res.code != 3 || string(res.stdout) != "hi" || string(res.stderr) != "oops" || res.tail() != "oops" {
		t.Fatalf("%+v %v", res, err)
	}
	for _, bad := range []string{"", "event: stdout\ndata: aGk=\n\n", "event: exit\ndata: {}\n\n", "event: stdout\ndata: !!\n\n"} {
		if _, err := parseEvents("s", []byte(bad)); err == nil {
			t.Errorf("parseEvents(%q) succeeded", bad)
		}
	}
}
