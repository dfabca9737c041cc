package core

// State is where a workspace (and its box) is in its life.
type State string

const (
	StateCreating State = "creating"
	StateRunning  State = "running"
	StatePausing  State = "pausing"
	StatePaused   State = "paused"
	StateResuming State = "resuming"
	StateDeleting State = "deleting"
	StateDeleted  State = "deleted"
	StateError    State = "error"
	StateUnknown  State = "unknown"
)

// Valid reports whether s is one of the defined states.
func (s State) Valid() bool {
	switch s {
	case StateCreating, StateRunning, StatePausing, StatePaused, StateResuming,
		StateDeleting, StateDeleted, StateError, StateUnknown, StateStopped:
		return true
	}
	return false
}

// canPause, canResume and canDelete are the legal starting points of each
// action, checked against the provider's real state at action time.
func (s State) canPause() bool  { return s == StateRunning }
func (s State) canResume() bool { return s == StatePaused || s == StateStopped }
func (s State) canDelete() bool {
	switch s {
	case StateRunning, StatePaused, StateStopped, StateError, StateUnknown, StateDeleted:
		return true
	}
	return false
}
