package main

import (
	"testing"
	"time"

	"github.com/canvasapp/companion/providers/wasm/modules/internal/api"
	"github.com/canvasapp/companion/providers/wasm/sdk"
)

func TestAdjustTurnsStateErrorsIntoConflicts(t *testing.T) {
	cases := []struct {
		status int
		body   string
		want   sdk.Kind
	}{
		{400, `{"statusCode":400,"message":"Sandbox is not started","code":"SANDBOX_STATE_ERROR"}`, sdk.Conflict},
		{400, `{"statusCode":400,"message":"State change in progress"}`, sdk.Conflict}, // older API
		{400, `{"statusCode":400,"message":"Sandbox is not in valid state"}`, sdk.Conflict},
		{400, `{"statusCode":400,"message":["autoStopInterval must not be less than 0"]}`, sdk.Invalid},
		{409, `{"statusCode":409,"message":"Sandbox state change in progress","code":"SANDBOX_STATE_CHANGE_IN_PROGRESS"}`, sdk.Conflict},
		{422, `{"statusCode":422,"message":"Pausing is not supported for this sandbox"}`, sdk.Invalid},
	}
	for _, c := range cases {
		// What api.Client.Call does with a failed response.
		resp := &sdk.Response{Status: c.status, Body: []byte(c.body), Headers: map[string]string{}}
		e := api.ErrorFrom("Daytona", resp, time.Now())
		adjust(resp, e)
		if e.Kind != c.want {
			t.Errorf("%d %s: %s, want %s", c.status, c.body, e.Kind, c.want)
		}
	}
}

func TestLifecycleIntervals(t *testing.T) {
	day := 24 * time.Hour
	cases := []struct {
		l                     sdk.Lifecycle
		stop, archive, delete int64 // -1: not sent
	}{
		{sdk.Lifecycle{}, -1, -1, -1},
		{sdk.Lifecycle{IdlePauseAfter: 30 * time.Second}, 1, -1, -1}, // never 0: that disables auto-stop
		{sdk.Lifecycle{IdlePauseAfter: 15 * time.Minute, PausedTTL: 2 * day}, 15, -1, 2 * 1440},
		{sdk.Lifecycle{PausedTTL: 10 * day}, -1, 0, 10 * 1440}, // archive pushed to 30 days
		{sdk.Lifecycle{PausedTTL: 45 * day}, -1, -1, 45 * 1440},
		{sdk.Lifecycle{PausedTTL: time.Second}, -1, -1, 1}, // never 0: that is "ephemeral"
	}
	val := func(p *int64) int64 {
		if p == nil {
			return -1
		}
		return *p
	}
	for _, c := range cases {
		var b createBody
		lifecycle(&b, c.l)
		if val(b.AutoStopInterval) != c.stop || val(b.AutoArchiveInterval) != c.archive || val(b.AutoDeleteInterval) != c.delete {
			t.Errorf("%+v: stop=%d archive=%d delete=%d", c.l, val(b.AutoStopInterval), val(b.AutoArchiveInterval), val(b.AutoDeleteInterval))
		}
	}
}

func TestStatesAndBox(t *testing.T) {
	for in, want := range map[string]sdk.State{
		"creating": sdk.Creating, "pulling_snapshot": sdk.Creating, "started": sdk.Running, "starting": sdk.Resuming,
		"restoring": sdk.Resuming, "stopping": sdk.Pausing, "stopped": sdk.Paused, "archived": sdk.Paused,
		"archiving": sdk.Paused, "paused": sdk.Paused, "destroying": sdk.Deleting, "destroyed": sdk.Deleted,
		"error": sdk.Failed, "build_failed": sdk.Failed, "something_new": sdk.Unknown,
	} {
		if got := state(in); got != want {
			t.Errorf("%s -> %s, want %s", in, got, want)
		}
	}
	now := time.Now()
	upd := now.Add(-time.Hour)
	s := sandbox{ID: "x", Name: "companion-ws_1", State: "stopped", Disk: 2.5, Labels: map[string]string{sdk.LabelWorkspace: "ws_1", "companion.name": "mine"}}
	s.UpdatedAt.Time = upd
	b := s.box(now)
	if b.Name != "mine" || !b.PausedAt.Equal(upd) || b.Size.Bytes != 5<<29 || b.Size.Source != sdk.SizeAllocated {
		t.Fatalf("%+v", b)
	}
	s.State = "archived"
	if b := s.box(now); !b.PausedAt.IsZero() {
		t.Fatal("archived boxes report no paused time")
	}
	if safeName("ws_abc-1.2") != true || safeName("ws/x") || safeName("") {
		t.Fatal("safeName")
	}
}
