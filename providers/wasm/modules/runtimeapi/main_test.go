package main

import (
	"testing"

	"github.com/canvasapp/companion/providers/wasm/sdk"
)

func TestStateMapping(t *testing.T) {
	cases := []struct {
		status, pod string
		want        sdk.State
	}{
		{"running", "", sdk.Running}, // list items carry no pod_status
		{"running", "ready", sdk.Running},
		{"running", "Pending", sdk.Creating},
		{"running", "running", sdk.Creating}, // running pod, agent not ready yet
		{"running", "not found", sdk.Creating},
		{"running", "CrashLoopBackOff", sdk.Failed},
		{"running", "failed", sdk.Failed},
		{"starting", "", sdk.Creating},
		{"paused", "", sdk.Paused},
		{"stopped", "", sdk.Deleted},
		{"error", "", sdk.Failed},
		{"exploded", "", sdk.Unknown},
	}
	for _, c := range cases {
		if got := (runtime{Status: c.status, PodStatus: c.pod}).state(); got != c.want {
			t.Errorf("status %q pod %q: %s, want %s", c.status, c.pod, got, c.want)
		}
	}
}

func TestOwnSessionIDs(t *testing.T) {
	a := sdk.Account{ID: "acc_1"}
	sid := sessionID(a, "ws_9")
	if ws, ok := ours(a, sid); !ok || ws != "ws_9" {
		t.Fatalf("ours(%q) = %q %v", sid, ws, ok)
	}
	for _, s := range []string{"", "companion-acc_1-", "companion-acc_2-ws_9", "someone-else", "companion-acc_12-ws_9"} {
		if ws, ok := ours(a, s); ok {
			t.Errorf("ours(%q) = %q, true; want false", s, ws)
		}
	}
	if _, ok := ours(sdk.Account{}, "companion--ws"); ok {
		t.Error("an account without id claims sessions")
	}
}
