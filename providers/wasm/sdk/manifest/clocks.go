package manifest

import "fmt"

// Clock is one deletion clock of the provider (ABI.md, "Deletion
// clocks"): a timer of the provider's own that deletes a box, or the files
// in it, without companion asking. Those deletions never reach companion,
// so it guards against each clock a module declares by exporting first.
//
// A module declares its clocks in its manifest only (like its
// capabilities), so companion can show them at inspect without running
// any of the module.
type Clock struct {
	// Name is short and stable, 1-32 of a-z, 0-9 and '_': "auto_delete",
	// "inactivity_destroy", "paused_reaper".
	Name string `json:"name"`
	// Starts is what starts the clock: ClockPaused or ClockIdle.
	Starts string `json:"starts"`
	// AfterSeconds is how long after its start the clock deletes; 0 when
	// the provider does not publish it, or for a Setting clock (the
	// workspace's paused TTL sets it). At most MaxClockSeconds.
	AfterSeconds int64 `json:"after_seconds"`
	// Loses is what the clock destroys: ClockLosesBox or ClockLosesFiles.
	Loses string `json:"loses"`
	// Setting marks a clock that runs only when companion asks for it at
	// create: the provider's paused TTL (capabilities.native_paused_ttl),
	// set from the workspace's lifecycle. Otherwise the provider runs it
	// for every box.
	Setting bool `json:"setting,omitempty"`
	// Note says, for people, what the provider documents about the clock
	// and where that comes from. Optional; one line, at most
	// MaxClockNote characters.
	Note string `json:"note,omitempty"`
}

// What starts a clock (Clock.Starts).
const (
	ClockPaused = "paused" // the box being paused or stopped, by anyone
	ClockIdle   = "idle"   // the box's last activity, whatever its state
)

// What a clock destroys (Clock.Loses).
const (
	ClockLosesBox   = "box"   // the box is deleted
	ClockLosesFiles = "files" // the box stays, its files do not
)

// Bounds of the clocks a manifest may declare.
const (
	MaxClocks = 8
	// MaxClockSeconds is 365 days: a provider's own deletion runs within
	// days or weeks, and a longer value is a unit mistake (milliseconds).
	MaxClockSeconds = 365 * 24 * 60 * 60
	MaxClockNote    = 300
)

func (m *Manifest) validateClocks() error {
	if len(m.Clocks) > MaxClocks {
		return fieldErr("clocks", "has %d clocks, more than %d", len(m.Clocks), MaxClocks)
	}
	seen := map[string]bool{}
	for i, c := range m.Clocks {
		p := fmt.Sprintf("clocks[%d]", i)
		if !ident().MatchString(c.Name) {
			return fieldErr(p+".name", "must be 1-32 characters of a-z, 0-9 and '_', starting with a letter (got %q)", c.Name)
		}
		if seen[c.Name] {
			return fieldErr(p+".name", "%q is declared twice", c.Name)
		}
		seen[c.Name] = true
		if c.Starts != ClockPaused && c.Starts != ClockIdle {
			return fieldErr(p+".starts", "must be %q (the box was paused or stopped) or %q (its last activity) (got %q)", ClockPaused, ClockIdle, c.Starts)
		}
		switch {
		case c.AfterSeconds < 0:
			return fieldErr(p+".after_seconds", "must be 0 (not published) or a positive number of seconds (got %d)", c.AfterSeconds)
		case c.AfterSeconds > MaxClockSeconds:
			return fieldErr(p+".after_seconds", "%d is above the ceiling %d (365 days); the value is in seconds", c.AfterSeconds, MaxClockSeconds)
		}
		if c.Loses != ClockLosesBox && c.Loses != ClockLosesFiles {
			return fieldErr(p+".loses", "must be %q (the box is deleted) or %q (the box stays, its files do not) (got %q)", ClockLosesBox, ClockLosesFiles, c.Loses)
		}
		if c.Setting {
			// A setting clock is the paused TTL companion sets at create
			// (spec.lifecycle.paused_ttl_seconds): that decides its start
			// and its period.
			switch {
			case !m.Capabilities.NativePausedTTL:
				return fieldErr(p+".setting", "needs capabilities.native_paused_ttl: a setting clock is the provider's paused TTL, which companion sets at create")
			case c.Starts != ClockPaused:
				return fieldErr(p+".starts", "must be %q for a setting clock: the paused TTL companion sets counts from the pause", ClockPaused)
			case c.AfterSeconds != 0:
				return fieldErr(p+".after_seconds", "must be 0 for a setting clock: the workspace's paused TTL sets its period (got %d)", c.AfterSeconds)
			}
		}
		if err := text(p+".note", c.Note, false, MaxClockNote); err != nil {
			return err
		}
	}
	return nil
}
