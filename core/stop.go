package core

import "time"

// StateStopped is a box whose process ended on its own (it crashed or
// exited) rather than being paused. It is resumable and deletable like a
// paused box, but it is not "paused": it has no paused age (PausedAt stays
// zero) and anything that acts on paused boxes, such as retention, leaves
// it alone unless it asks for stopped boxes too.
const StateStopped State = "stopped"

// StopReason says why a box is not running.
type StopReason string

const (
	// StopNone: the box is running, or why it stopped is not known.
	StopNone StopReason = ""
	// StopCompanion: companion paused it (a person's or the retention
	// policy's request).
	StopCompanion StopReason = "companion"
	// StopProviderIdle: the provider's native idle pause.
	StopProviderIdle StopReason = "provider_idle"
	// StopOutside: someone stopped or paused it at the provider, outside
	// companion (docker stop, a provider console).
	StopOutside StopReason = "outside"
	// StopCrashed: its process died with a failure (a non-zero exit code,
	// a signal, the kernel's OOM killer). Goes with StateStopped.
	StopCrashed StopReason = "crashed"
	// StopExited: its process ended by itself with exit code 0. Goes with
	// StateStopped.
	StopExited StopReason = "exited"
)

// Valid reports whether r is one of the defined reasons.
func (r StopReason) Valid() bool {
	switch r {
	case StopNone, StopCompanion, StopProviderIdle, StopOutside, StopCrashed, StopExited:
		return true
	}
	return false
}

// PausedForRetention reports whether ws counts as paused for paused age
// and retention: paused, not merely stopped by a crash or an exit.
func (ws Workspace) PausedForRetention() bool {
	return ws.State == StatePaused && ws.StopReason != StopCrashed && ws.StopReason != StopExited
}

// applyStop carries the box's stop reason and exit code onto the
// workspace; ws.State is already the box's, prevState the one before. A
// companion pause is known only to companion, not to the provider (which
// reports it as a stop from outside): it is kept as long as the box is
// still in the same stop, that is, stopped at the same time.
func applyStop(ws Workspace, box Box, prevState State, prevPausedAt time.Time) Workspace {
	switch ws.State {
	case StatePaused, StateStopped:
	default:
		if ws.State != StatePausing {
			ws.StopReason, ws.ExitCode = StopNone, nil
		}
		return ws
	}
	reason := box.StopReason
	if !reason.Valid() {
		reason = StopNone
	}
	sameStop := prevState == StatePausing ||
		(prevState == StatePaused && (box.PausedAt.IsZero() || prevPausedAt.IsZero() || box.PausedAt.Equal(prevPausedAt)))
	if ws.StopReason == StopCompanion && ws.State == StatePaused && sameStop {
		reason = StopCompanion
	}
	if reason == StopNone && ws.State == prevState && sameStop {
		// The provider can no longer tell (Docker's event window moved
		// on, say); what was known of this same stop still holds.
		reason = ws.StopReason
	}
	ws.StopReason = reason
	ws.ExitCode = nil
	if box.ExitCode != nil {
		c := *box.ExitCode
		ws.ExitCode = &c
	}
	return ws
}
