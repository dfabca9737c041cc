package core

import (
	"testing"
	"time"
)

// TestApplyStopKeepsCompanionPauseOnlyForTheSameStop: the provider reports
// companion's own pause as a stop from outside; the workspace keeps
// "companion" while the box is in that stop, and takes the provider's
// reason once the box was started and stopped again (a new stop time).
func TestApplyStopKeepsCompanionPauseOnlyForTheSameStop(t *testing.T) {
	s := &Service{cfg: Config{Now: func() time.Time { return time.Unix(100, 0) }}}
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ws := Workspace{ID: "ws_1", State: StatePaused, StopReason: StopCompanion, PausedAt: t1}

	same := s.applyBox(ws, Box{ID: "b", State: StatePaused, PausedAt: t1, StopReason: StopOutside})
	if same.StopReason != StopCompanion || !same.PausedForRetention() {
		t.Fatalf("same stop: reason %q, paused for retention %v; want companion, true", same.StopReason, same.PausedForRetention())
	}
	again := s.applyBox(ws, Box{ID: "b", State: StatePaused, PausedAt: t1.Add(time.Hour), StopReason: StopOutside})
	if again.StopReason != StopOutside {
		t.Fatalf("a later stop from outside reads %q, want outside", again.StopReason)
	}
	outside := Workspace{ID: "ws_2", State: StatePaused, StopReason: StopOutside, PausedAt: t1}
	if kept := s.applyBox(outside, Box{ID: "b", State: StatePaused, PausedAt: t1}); kept.StopReason != StopOutside {
		t.Fatalf("same stop, provider no longer tells: reason %q, want outside kept", kept.StopReason)
	}
	code := 137
	crashed := s.applyBox(ws, Box{ID: "b", State: StateStopped, StopReason: StopCrashed, ExitCode: &code})
	if crashed.State != StateStopped || crashed.StopReason != StopCrashed || !crashed.PausedAt.IsZero() ||
		crashed.ExitCode == nil || *crashed.ExitCode != 137 || crashed.PausedForRetention() {
		t.Fatalf("crash: %+v; want stopped, crashed, exit 137, no paused_at, not paused for retention", crashed)
	}
	running := s.applyBox(crashed, Box{ID: "b", State: StateRunning})
	if running.StopReason != StopNone || running.ExitCode != nil {
		t.Fatalf("running again: reason %q exit %v; want none", running.StopReason, running.ExitCode)
	}
	if !changed(crashed, running) || !changed(same, again) {
		t.Fatal("a new stop reason or exit code must be a feed change")
	}
	if !StateStopped.canResume() || !StateStopped.canDelete() || StateStopped.canPause() {
		t.Fatal("a stopped box must be resumable and deletable, not pausable")
	}
}
