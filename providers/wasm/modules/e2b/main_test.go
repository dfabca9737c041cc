package main

import (
	"testing"
	"time"

	"github.com/canvasapp/companion/providers/wasm/sdk"
)

func TestPausedAtOnlyWhenPlausible(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	mk := func(st string, started, end time.Time) sandbox {
		s := sandbox{SandboxID: "x", State: st, DiskSizeMB: 512}
		s.StartedAt.Time, s.EndAt.Time = started, end
		return s
	}
	start := now.Add(-2 * time.Hour)
	cases := []struct {
		s    sandbox
		want time.Time
	}{
		{mk("paused", start, now.Add(-time.Hour)), now.Add(-time.Hour)}, // endAt = pause time
		{mk("paused", start, now.Add(time.Hour)), time.Time{}},          // endAt still in the future: an expiry
		{mk("paused", start, start.Add(-time.Minute)), time.Time{}},     // before the start: nonsense
		{mk("running", start, now.Add(-time.Hour)), time.Time{}},
	}
	for _, c := range cases {
		b := c.s.box(now)
		if !b.PausedAt.Equal(c.want) {
			t.Errorf("%s end %v: paused at %v, want %v", c.s.State, c.s.EndAt, b.PausedAt, c.want)
		}
		if b.Size == nil || b.Size.Bytes != 512<<20 || b.Size.Source != sdk.SizeAllocated || !b.CreatedAt.IsZero() {
			t.Errorf("%+v", b)
		}
	}
	for in, want := range map[string]sdk.State{"running": sdk.Running, "paused": sdk.Paused, "new": sdk.Unknown} {
		if state(in) != want {
			t.Errorf("%s", in)
		}
	}
}
