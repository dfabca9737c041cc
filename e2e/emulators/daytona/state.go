package daytona

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

func minutes(n int) time.Duration { return time.Duration(n) * time.Minute }

// settleLocked brings every box up to now: in-progress transitions finish
// and Daytona's own lifecycle jobs (auto-stop, auto-archive, auto-delete)
// fire, each at the instant it was due, so one big clock jump replays the
// whole chain in order. The real jobs run every 10 s; the emulator fires at
// the exact due time, which is within that slack. Callers hold s.mu.
func (s *Server) settleLocked() {
	now := s.Clock().Now()
	for _, b := range s.boxes {
		s.refreshOpen(b, now)
		s.advance(b, now)
		if b.sb.State == StateDestroyed {
			s.removeLocked(b)
		}
	}
	for id, g := range s.ghosts {
		if !now.Before(g.until) {
			delete(s.ghosts, id)
		}
	}
}

// removeLocked forgets a destroyed box; with ListLag the list keeps
// showing it, as it was when its delete began, until the lag has passed.
func (s *Server) removeLocked(b *box) {
	delete(s.boxes, b.sb.ID)
	if b.deleting != nil {
		s.ghosts[b.sb.ID] = &ghost{sb: *b.deleting, until: b.deletingAt.Add(s.opts.ListLag)}
	}
}

// listedLocked is the box as the lagging list shows it at now, or false
// when the list does not show it (yet).
func (s *Server) listedLocked(b *box, now time.Time) (Sandbox, bool) {
	if now.Before(b.listedFrom) {
		return Sandbox{}, false
	}
	if b.deleting != nil && now.Before(b.deletingAt.Add(s.opts.ListLag)) {
		return *b.deleting, true
	}
	return b.sb, true
}

// advance applies b's due events up to now, in time order.
func (s *Server) advance(b *box, now time.Time) {
	for range 64 { // a box has at most a handful of chained events
		at, fire := s.next(b)
		if fire == nil || at.After(now) {
			return
		}
		fire(at)
		if b.sb.State == StateDestroyed {
			return
		}
	}
}

// next returns b's next scheduled event.
func (s *Server) next(b *box) (time.Time, func(time.Time)) {
	sb := &b.sb
	if !b.until.IsZero() {
		return b.until, func(at time.Time) { s.settle(b, at) }
	}
	last := sb.LastActivityAt
	switch sb.State {
	case StateStarted:
		// sandbox.manager.ts: stop when lastActivityAt < now - autoStopInterval.
		if sb.AutoStopInterval > 0 {
			return last.Add(minutes(sb.AutoStopInterval)), func(at time.Time) { s.beginStop(b, at) }
		}
	case StateStopped:
		var at time.Time
		var fire func(time.Time)
		archive := sb.AutoArchiveInterval
		if archive == 0 {
			archive = MaxAutoArchive
		}
		at, fire = last.Add(minutes(archive)), func(at time.Time) { s.begin(b, at, StateArchiving, s.delays.Archive) }
		// Only stopped boxes are auto-deleted; archived ones never are
		// (reference: code reading, marked uncertain). Delete wins a tie.
		if sb.AutoDeleteInterval >= 0 {
			if del := last.Add(minutes(sb.AutoDeleteInterval)); !del.After(at) {
				at, fire = del, func(at time.Time) { s.begin(b, at, StateDestroying, s.delays.Destroy) }
			}
		}
		return at, fire
	}
	return time.Time{}, nil
}

// begin moves b into an in-progress state at time at.
func (s *Server) begin(b *box, at time.Time, state string, d time.Duration) {
	if state == StateDestroying && s.opts.ListLag > 0 && b.deleting == nil {
		listed := b.sb.clone()
		b.deleting, b.deletingAt = &listed, at
	}
	b.sb.State = state
	b.sb.DesiredState = transitional[state]
	b.sb.UpdatedAt = at
	b.until = at.Add(d)
}

// settle finishes b's in-progress transition. A lifecycle state change
// resets the auto-stop timer, so lastActivityAt moves with it.
func (s *Server) settle(b *box, at time.Time) {
	target := transitional[b.sb.State]
	b.sb.State, b.sb.DesiredState = target, target
	b.sb.UpdatedAt, b.sb.LastActivityAt = at, at
	b.until = time.Time{}
}

// beginStop stops b, or destroys it when it is ephemeral
// (autoDeleteInterval 0: ephemeral.util.ts makes stop a soft delete).
func (s *Server) beginStop(b *box, at time.Time) {
	if b.sb.AutoDeleteInterval == 0 {
		s.begin(b, at, StateDestroying, s.delays.Destroy)
		return
	}
	s.begin(b, at, StateStopping, s.delays.Stop)
}

// lookupLocked finds a live box by id, then by name.
func (s *Server) lookupLocked(idOrName string) *box {
	if b, ok := s.boxes[idOrName]; ok {
		return b
	}
	for _, b := range s.boxes {
		if b.sb.Name == idOrName {
			return b
		}
	}
	return nil
}

// newBox builds a settled or creating box with API defaults.
func (s *Server) newSandbox(now time.Time) Sandbox {
	id := emulator.UUID()
	return Sandbox{
		ID:                  id,
		OrganizationID:      s.opts.OrganizationID,
		Name:                id,
		Target:              "us",
		RunnerID:            emulator.UUID(),
		SandboxClass:        "container",
		Snapshot:            "daytonaio/sandbox:0.4.3",
		User:                "daytona",
		CPU:                 1,
		Memory:              1,
		Disk:                3,
		Labels:              map[string]string{},
		BackupState:         "None",
		AutoStopInterval:    DefaultAutoStop,
		AutoArchiveInterval: DefaultAutoArchive,
		AutoDeleteInterval:  DefaultAutoDelete,
		CreatedAt:           now,
		UpdatedAt:           now,
		LastActivityAt:      now,
		DaemonVersion:       "0.190.0",
		ToolboxProxyURL:     "https://proxy.app.daytona.io/toolbox",
	}
}

// Seed puts a sandbox straight into the emulator, bypassing the API (for
// "boxes companion did not create"), and returns it as stored. It panics on
// a duplicate id or name or an unknown state, which are test bugs.
func (s *Server) Seed(sd SeedSandbox) Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	now := s.Clock().Now()
	sb := s.newSandbox(now)
	if sd.ID != "" {
		sb.ID, sb.Name = sd.ID, sd.ID
	}
	if sd.Name != "" {
		sb.Name = sd.Name
	}
	if s.boxes[sb.ID] != nil || s.lookupLocked(sb.Name) != nil {
		panic("daytona: seed: duplicate sandbox id or name " + sb.Name)
	}
	sb.State = StateStarted
	if sd.State != "" {
		if !slices.Contains(allStates, sd.State) {
			panic("daytona: seed: unknown state " + sd.State)
		}
		sb.State = sd.State
	}
	sb.DesiredState = sb.State
	if target, ok := transitional[sb.State]; ok {
		sb.DesiredState = target
	}
	if sd.SandboxClass != "" {
		sb.SandboxClass = sd.SandboxClass
	}
	if sd.Snapshot != "" {
		sb.Snapshot = sd.Snapshot
	}
	if sd.Labels != nil {
		sb.Labels = maps.Clone(sd.Labels)
	}
	sb.Env = maps.Clone(sd.Env)
	if sd.AutoStopInterval != nil {
		sb.AutoStopInterval = *sd.AutoStopInterval
	}
	if sd.AutoArchiveInterval != nil {
		sb.AutoArchiveInterval = *sd.AutoArchiveInterval
	}
	if sd.AutoDeleteInterval != nil {
		sb.AutoDeleteInterval = *sd.AutoDeleteInterval
	}
	if !sd.CreatedAt.IsZero() {
		sb.CreatedAt, sb.UpdatedAt, sb.LastActivityAt = sd.CreatedAt, sd.CreatedAt, sd.CreatedAt
	}
	if !sd.LastActivityAt.IsZero() {
		sb.LastActivityAt = sd.LastActivityAt
	}
	sb.ErrorReason = sd.ErrorReason
	b := &box{sb: sb}
	if _, ok := transitional[sb.State]; ok {
		b.until = now.Add(s.delayFor(sb.State))
	}
	s.boxes[sb.ID] = b
	return b.sb.clone()
}

func (s *Server) delayFor(state string) time.Duration {
	switch state {
	case StateCreating:
		return s.delays.Create
	case StateStarting:
		return s.delays.Start
	case StateRestoring:
		return s.delays.Restore
	case StateResuming:
		return s.delays.Resume
	case StateStopping:
		return s.delays.Stop
	case StateArchiving:
		return s.delays.Archive
	case StatePausing:
		return s.delays.Pause
	case StateDestroying:
		return s.delays.Destroy
	}
	return 0
}

// Sandbox returns the sandbox with that id or name as of the emulated now.
func (s *Server) Sandbox(idOrName string) (Sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	b := s.lookupLocked(idOrName)
	if b == nil {
		return Sandbox{}, false
	}
	return b.sb.clone(), true
}

// Sandboxes returns every live sandbox, oldest first.
func (s *Server) Sandboxes() []Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	out := make([]Sandbox, 0, len(s.boxes))
	for _, b := range s.boxes {
		out = append(out, b.sb.clone())
	}
	slices.SortFunc(out, func(a, b Sandbox) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Touch records activity on a sandbox the way toolbox, preview or SSH
// traffic does, resetting its auto-stop timer. It reports whether the
// sandbox exists.
func (s *Server) Touch(idOrName string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	b := s.lookupLocked(idOrName)
	if b == nil {
		return false
	}
	b.sb.LastActivityAt = s.Clock().Now()
	return true
}

// Update lets a test change a stored sandbox directly. Changing State to an
// in-progress state schedules its completion after the configured delay.
// It reports whether the sandbox exists.
func (s *Server) Update(idOrName string, fn func(*Sandbox)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	b := s.lookupLocked(idOrName)
	if b == nil {
		return false
	}
	before, id := b.sb.State, b.sb.ID
	fn(&b.sb)
	if b.sb.ID != id {
		panic("daytona: Update must not change the id")
	}
	if b.sb.State != before {
		b.until = time.Time{}
		b.sb.DesiredState = b.sb.State
		if target, ok := transitional[b.sb.State]; ok {
			b.sb.DesiredState = target
			b.until = s.Clock().Now().Add(s.delayFor(b.sb.State))
		}
	}
	s.settleLocked()
	return true
}
