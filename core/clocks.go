package core

import "time"

// A provider's deletion clock is a timer of its own that deletes a box, or
// the files in it, without companion asking: Daytona's auto-delete of a
// stopped sandbox, an inactivity policy that destroys idle sessions, a
// reaper of paused runtimes, a snapshot that expires, a sandbox that loses
// its files when it sleeps. Those deletions never reach companion, so
// companion guards against each clock an adapter declares
// (ProviderInfo.Clocks): a workspace that a clock applies to is exported
// before every pause companion makes, and after a pause the provider made
// itself it is exported before the clock runs out (serve) or marked at
// risk (desktop).

// What starts a deletion clock.
const (
	// ClockStartsPaused: the box being paused or stopped (by anyone).
	ClockStartsPaused = "paused"
	// ClockStartsIdle: the box's last activity, whatever its state.
	ClockStartsIdle = "idle"
	// ClockStartsRunning: the box being made (Box.CreatedAt), for a
	// provider that ends a running box a fixed time later and makes a new
	// box at every resume (Modal's sandbox lifetime). It runs only while
	// the box runs; serve's guard pauses the workspace before it ends.
	ClockStartsRunning = "running"
)

// What a deletion clock destroys.
const (
	ClockLosesBox   = "box"   // the box is deleted
	ClockLosesFiles = "files" // the box stays, its files do not
)

// DeletionClock is one deletion clock of a provider.
type DeletionClock struct {
	// Name is short and stable: "auto_delete", "inactivity_destroy",
	// "paused_reaper", "snapshot_expiry", "sleep_wipe".
	Name string `json:"name"`
	// Starts is ClockStartsPaused, ClockStartsIdle or ClockStartsRunning.
	Starts string `json:"starts"`
	// After is how long after its start the clock deletes; 0 when the
	// provider does not publish it (companion then cannot wait: it
	// exports as soon as it can) or, for a Setting clock, when the
	// workspace's lifecycle sets it.
	After time.Duration `json:"after"`
	// Loses is ClockLosesBox or ClockLosesFiles.
	Loses string `json:"loses"`
	// Setting is set for a clock that runs only when companion asks for it
	// at create (Lifecycle.PausedTTL: Daytona's autoDeleteInterval);
	// otherwise the provider runs it for every box.
	Setting bool `json:"setting"`
	// Note says, for people, what the provider documents about it and
	// where that comes from.
	Note string `json:"note"`
}

// EffectiveClocks are the deletion clocks that apply to ws: every clock
// the provider always runs, and a Setting clock only when ws's lifecycle
// asked for it (with its After from the lifecycle).
func EffectiveClocks(info ProviderInfo, ws Workspace) []DeletionClock {
	var out []DeletionClock
	for _, c := range info.Clocks {
		if c.Setting {
			if ws.Lifecycle.PausedTTL <= 0 {
				continue
			}
			c.After = ws.Lifecycle.PausedTTL
		}
		out = append(out, c)
	}
	return out
}

// checkClocks refuses a lifecycle that would set a deletion clock
// companion cannot guard (a Setting clock: Daytona's auto-delete from
// paused_ttl). Every pause companion makes of such a workspace is
// preceded by a verified export, which needs exports; a pause the
// provider makes on its own is exported by serve's guard before the
// clock runs out, which the desktop, not running then, cannot promise.
func (s *Service) checkClocks(info ProviderInfo, l Lifecycle) error {
	if l.PausedTTL <= 0 {
		return nil
	}
	for _, c := range info.Clocks {
		if !c.Setting {
			continue
		}
		switch {
		case !s.exportsConfigured():
			return Errorf(KindInvalid, "paused_ttl at %s sets its %s clock, which deletes the %s; companion sets it only with an export before every pause, and exports are not configured here. Leave paused_ttl unset", info.Name, c.Name, c.Loses)
		case !s.cfg.ScheduledDeletion && info.Capabilities.NativeIdlePause:
			return Errorf(KindInvalid, "paused_ttl at %s sets its %s clock, which deletes the %s; %s also pauses boxes on its own, and on the desktop nothing can export such a box before the clock runs out. Leave paused_ttl unset here, or create the workspace through companion serve, which exports it first", info.Name, c.Name, c.Loses, info.Name)
		}
	}
	return nil
}
