package core

import (
	"strings"
	"testing"
	"time"
)

var (
	autoDelete = DeletionClock{Name: "auto_delete", Starts: ClockStartsPaused, Loses: ClockLosesBox, Setting: true}
	reaper     = DeletionClock{Name: "paused_reaper", Starts: ClockStartsPaused, After: 24 * time.Hour, Loses: ClockLosesBox}
	inactivity = DeletionClock{Name: "inactivity_destroy", Starts: ClockStartsIdle, Loses: ClockLosesBox}
)

func clockService(serve bool, provider string, clocks ...DeletionClock) *Service {
	s := &Service{cfg: Config{ScheduledDeletion: serve, GuardMargin: time.Hour}}
	s.clocks.learn(provider, clocks)
	return s
}

// TestDeriveDeletionPicksTheFirstClock: a paused box gets the clock that
// deletes it first, a running one none; a clock whose time is not
// published comes first; a Setting clock applies only when the lifecycle
// asked for it, with its time.
func TestDeriveDeletionPicksTheFirstClock(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	paused := Workspace{ID: "ws_1", Provider: "p", BoxID: "b", State: StatePaused, PausedAt: t0}

	s := clockService(true, "p", autoDelete, reaper)
	got := s.deriveDeletion(paused)
	if got.DeletionClock != "paused_reaper" || !got.DeletionDueAt.Equal(t0.Add(24*time.Hour)) || !got.AtRisk {
		t.Fatalf("reaper only: %q due %v at risk %v", got.DeletionClock, got.DeletionDueAt, got.AtRisk)
	}
	if want := t0.Add(23 * time.Hour); !got.ExportBy.Equal(want) {
		t.Errorf("serve's export_by %v, want an hour before the reaper, %v", got.ExportBy, want)
	}

	withTTL := paused
	withTTL.Lifecycle.PausedTTL = 2 * time.Hour
	got = s.deriveDeletion(withTTL)
	if got.DeletionClock != "auto_delete" || !got.DeletionDueAt.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("auto-delete asked for: %q due %v, want auto_delete at +2h", got.DeletionClock, got.DeletionDueAt)
	}

	running := withTTL
	running.State, running.PausedAt = StateRunning, time.Time{}
	if got := s.deriveDeletion(running); got.DeletionClock != "" || got.AtRisk || !got.DeletionDueAt.IsZero() {
		t.Errorf("a running box: %+v, want no clock", got)
	}

	s = clockService(false, "p", reaper, inactivity)
	idle := paused
	idle.LastActivityAt = t0.Add(-time.Hour)
	got = s.deriveDeletion(idle)
	if got.DeletionClock != "inactivity_destroy" || !got.DeletionDueAt.IsZero() || !got.AtRisk {
		t.Errorf("unpublished clock: %q due %v at risk %v, want inactivity_destroy, unknown time, at risk", got.DeletionClock, got.DeletionDueAt, got.AtRisk)
	}
	if !got.ExportBy.IsZero() {
		t.Errorf("desktop export_by %v, want none (no guard)", got.ExportBy)
	}

	// A provider not described yet keeps what the workspace has.
	unknown := paused
	unknown.Provider, unknown.DeletionClock = "other", "kept"
	if got := s.deriveDeletion(unknown); got.DeletionClock != "kept" {
		t.Errorf("unknown provider: clock %q, want the stored one kept", got.DeletionClock)
	}
}

// TestRunningClock: a running clock (Modal's lifetime) applies only while
// the box runs, from when the box was made, and keeps the workspace at
// risk whatever was exported (a running box changes); a paused box gets
// the provider's other clocks. A box made at an unknown time is timed
// from its workspace, no later than the real end. A new box resets it.
func TestRunningClock(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	lifetime := DeletionClock{Name: "lifetime", Starts: ClockStartsRunning, After: 24 * time.Hour, Loses: ClockLosesBox}
	expiry := DeletionClock{Name: "snapshot_expiry", Starts: ClockStartsPaused, After: 30 * 24 * time.Hour, Loses: ClockLosesBox}
	s := clockService(true, "m", lifetime, expiry)
	run := Workspace{ID: "ws_1", Provider: "m", BoxID: "sb-1", State: StateRunning, CreatedAt: t0.Add(-48 * time.Hour),
		BoxCreatedAt: t0, LastExportAt: t0.Add(time.Hour)}
	got := s.deriveDeletion(run)
	if got.DeletionClock != "lifetime" || !got.DeletionDueAt.Equal(t0.Add(24*time.Hour)) || !got.AtRisk ||
		!got.ExportBy.Equal(t0.Add(23*time.Hour)) {
		t.Fatalf("running: %q due %v at risk %v export by %v, want lifetime at +24h, at risk, guard at +23h",
			got.DeletionClock, got.DeletionDueAt, got.AtRisk, got.ExportBy)
	}
	unknown := run
	unknown.BoxCreatedAt = time.Time{}
	if got := s.deriveDeletion(unknown); !got.DeletionDueAt.Equal(run.CreatedAt.Add(24 * time.Hour)) {
		t.Errorf("box made at an unknown time: due %v, want a day after the workspace was made", got.DeletionDueAt)
	}
	paused := run
	paused.State, paused.PausedAt, paused.LastExportAt = StatePaused, t0.Add(2*time.Hour), t0.Add(2*time.Hour)
	if got := s.deriveDeletion(paused); got.DeletionClock != "snapshot_expiry" || got.AtRisk {
		t.Errorf("paused: %q at risk %v, want snapshot_expiry, covered by the export before the pause", got.DeletionClock, got.AtRisk)
	}
	if got := clockService(false, "m", lifetime).deriveDeletion(run); !got.AtRisk || !got.ExportBy.IsZero() {
		t.Errorf("desktop: at risk %v export by %v, want at risk with no guard", got.AtRisk, got.ExportBy)
	}

	// applyBox records the box's time, and forgets it for another box.
	resumed := s.applyBox(run, Box{ID: "sb-2", State: StateRunning, CreatedAt: t0.Add(30 * time.Hour)})
	if !resumed.BoxCreatedAt.Equal(t0.Add(30 * time.Hour)) {
		t.Errorf("after a resume to a new box: box made %v", resumed.BoxCreatedAt)
	}
	if other := s.applyBox(run, Box{ID: "sb-3", State: StateRunning}); !other.BoxCreatedAt.IsZero() {
		t.Errorf("a new box that does not say when it was made kept the old box's time %v", other.BoxCreatedAt)
	}
	if !changed(run, resumed) {
		t.Error("a new box's time is not a change")
	}
}

// TestCoveredNeedsAnExportOfTheBoxAsItIs: an export just before
// companion's own pause covers the box; one from before later work does
// not; one after the last activity does.
func TestCoveredNeedsAnExportOfTheBoxAsItIs(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	ws := Workspace{State: StatePaused, PausedAt: t0, LastActivityAt: t0.Add(-10 * time.Minute)}
	for _, c := range []struct {
		export time.Time
		want   bool
	}{
		{time.Time{}, false},
		{t0.Add(-time.Minute), true},       // companion exported, then paused
		{t0.Add(-5 * time.Minute), true},   // after the last activity
		{t0.Add(-20 * time.Minute), false}, // before it
		{t0.Add(time.Hour), true},          // the guard's, while paused
	} {
		w := ws
		w.LastExportAt = c.export
		if got := covered(w); got != c.want {
			t.Errorf("export at %v: covered %v, want %v", c.export, got, c.want)
		}
	}
}

// TestExportByLeavesTheMargin: margin before the deletion; at once for a
// clock shorter than the margin or with no published time.
func TestExportByLeavesTheMargin(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		due, want time.Time
	}{
		{t0.Add(24 * time.Hour), t0.Add(23 * time.Hour)},
		{t0.Add(30 * time.Minute), t0},
		{t0.Add(time.Hour), t0},
		{time.Time{}, t0},
	} {
		if got := exportBy(t0, c.due, time.Hour); !got.Equal(c.want) {
			t.Errorf("due %v: export by %v, want %v", c.due, got, c.want)
		}
	}
}

// TestCheckClocksNamesTheTrade: a Setting clock is refused on the desktop
// for a provider that pauses on its own, and anywhere exports are off;
// the message says what to do.
func TestCheckClocksNamesTheTrade(t *testing.T) {
	info := ProviderInfo{Name: "daytona", Clocks: []DeletionClock{autoDelete}, Capabilities: Capabilities{NativeIdlePause: true, NativePausedTTL: true}}
	ttl := Lifecycle{PausedTTL: 24 * time.Hour}
	desktop := &Service{cfg: Config{Exporter: noExporter{}, Exports: noExports{}}}
	if err := desktop.checkClocks(info, Lifecycle{}); err != nil {
		t.Errorf("no paused_ttl: %v", err)
	}
	err := desktop.checkClocks(info, ttl)
	if !IsKind(err, KindInvalid) || !strings.Contains(err.Error(), "companion serve") || !strings.Contains(err.Error(), "auto_delete") {
		t.Errorf("desktop: %v, want invalid naming the clock and serve", err)
	}
	serve := &Service{cfg: Config{ScheduledDeletion: true, Exporter: noExporter{}, Exports: noExports{}}}
	if err := serve.checkClocks(info, ttl); err != nil {
		t.Errorf("serve with exports: %v", err)
	}
	bare := &Service{cfg: Config{ScheduledDeletion: true}}
	if err := bare.checkClocks(info, ttl); !IsKind(err, KindInvalid) || !strings.Contains(err.Error(), "exports are not configured") {
		t.Errorf("without exports: %v", err)
	}
	noPause := info
	noPause.Capabilities.NativeIdlePause = false
	if err := desktop.checkClocks(noPause, ttl); err != nil {
		t.Errorf("desktop, a provider that never pauses on its own: %v", err)
	}
}

// TestGuardBacksOff: a failed guard export waits, longer each time, up to
// the cap; a success forgets the failures; one run at a time.
func TestGuardBacksOff(t *testing.T) {
	var g guardState
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	if !g.begin("ws", t0) || g.begin("ws", t0) {
		t.Fatal("a second guard of a running one began")
	}
	g.end("ws", false, t0)
	if g.begin("ws", t0.Add(4*time.Minute)) || !g.begin("ws", t0.Add(5*time.Minute)) {
		t.Fatal("first failure: want a 5 min wait")
	}
	g.end("ws", false, t0)
	if g.begin("ws", t0.Add(9*time.Minute)) || !g.begin("ws", t0.Add(10*time.Minute)) {
		t.Fatal("second failure: want a 10 min wait")
	}
	for range 10 {
		g.end("ws", false, t0)
		g.begin("ws", t0.Add(guardBackoffMax))
	}
	g.end("ws", false, t0)
	if !g.begin("ws", t0.Add(guardBackoffMax)) {
		t.Fatal("the wait grew past its cap")
	}
	g.end("ws", true, t0)
	if !g.begin("ws", t0) {
		t.Fatal("a success did not forget the failures")
	}
}

// TestVanishedErrorSaysWhatSurvives names the export, or that the files
// are lost.
func TestVanishedErrorSaysWhatSurvives(t *testing.T) {
	ws := Workspace{BoxID: "b1", Provider: "daytona", DeletionClock: "auto_delete"}
	if msg := vanishedError(ws); !strings.Contains(msg, "files are lost") || !strings.Contains(msg, "auto_delete") {
		t.Errorf("no export: %q", msg)
	}
	ws.LastExportID, ws.LastExportAt = "exp_1", time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	if msg := vanishedError(ws); !strings.Contains(msg, "exp_1") || !strings.Contains(msg, "2026-12-01T09:00:00Z") {
		t.Errorf("with an export: %q", msg)
	}
}

// noExporter and noExports are configured exports nothing here calls.
type (
	noExporter struct{ Exporter }
	noExports  struct{ ExportStore }
)
