package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/canvasapp/companion/providers/wasm/sdk"
)

func TestSessionStates(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(status string, lastEvent time.Time) session {
		s := session{SessionID: "sess_1", Status: status}
		s.CreatedAt.Time, s.LastEventAt.Time = created, lastEvent
		return s
	}
	cases := []struct {
		s    session
		want sdk.State
	}{
		{mk("SESSION_STATUS_PROVISIONING", created), sdk.Creating},
		{mk("SESSION_STATUS_PROVISIONING", created.Add(time.Hour)), sdk.Resuming},
		{mk("SESSION_STATUS_READY", created), sdk.Running},
		{mk("SESSION_STATUS_DETACHED", created), sdk.Running},
		{mk("SESSION_STATUS_PAUSED", created), sdk.Paused},
		{mk("SESSION_STATUS_DESTROYING", created), sdk.Deleting},
		{mk("SESSION_STATUS_DESTROYED", created), sdk.Deleted},
		{mk("SESSION_STATUS_FAILED", created), sdk.Failed},
		{mk("SESSION_STATUS_LOCKED", created), sdk.Unknown},
		{mk("READY", created), sdk.Running}, // without the enum prefix
	}
	for _, c := range cases {
		if got := c.s.state(); got != c.want {
			t.Errorf("%s: %s, want %s", c.s.Status, got, c.want)
		}
	}
}

func TestSessionBoxLabels(t *testing.T) {
	b := session{SessionID: "s", Name: "companion-ws_abc", Status: "SESSION_STATUS_PAUSED"}.box()
	if b.Labels[sdk.LabelWorkspace] != "ws_abc" || !b.PausedAt.IsZero() {
		t.Fatalf("%+v", b)
	}
	if b := (session{SessionID: "s", Name: "canvas"}).box(); b.Labels != nil {
		t.Fatalf("%+v", b.Labels)
	}
	if b := (session{SessionID: "s", Name: "companion-"}).box(); b.Labels != nil {
		t.Fatalf("%+v", b.Labels)
	}
}

func TestWrappedOrBareSession(t *testing.T) {
	for _, body := range []string{`{"session":{"session_id":"sess_1","status":"SESSION_STATUS_READY","extra":1}}`, `{"session_id":"sess_1","status":"SESSION_STATUS_READY"}`} {
		var w wrapped
		if err := json.Unmarshal([]byte(body), &w); err != nil || w.SessionID != "sess_1" || w.state() != sdk.Running {
			t.Fatalf("%s: %+v %v", body, w, err)
		}
	}
}
