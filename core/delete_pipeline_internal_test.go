package core

import (
	"strings"
	"testing"
	"time"
)

// TestResumeAtEveryStep: a crash at any step resumes where it is safe: the
// first three from the start, a wake or an export at the wake (an export
// is re-done from scratch), a verify at the verify, and a provider delete
// or the final mark at the (idempotent) provider delete.
func TestResumeAtEveryStep(t *testing.T) {
	want := map[string]string{
		"requested": StepLock, StepLock: StepLock, StepRecheck: StepLock,
		StepWake: StepWake, StepExport: StepWake, StepVerify: StepVerify,
		StepProviderDelete: StepProviderDelete, StepMarkDeleted: StepProviderDelete,
	}
	for step, at := range want {
		if got := DeleteSteps[resumeAt(step)]; got != at {
			t.Errorf("a crash at %s resumes at %s, want %s", step, got, at)
		}
	}
}

// TestJournalChangedIn: the re-check stops a delete whose box was resumed,
// replaced or used since it was asked for, and accepts jitter.
func TestJournalChangedIn(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	j := &DeleteJournal{State: StatePaused, BoxID: "b1", LastActivityAt: at}
	same := Workspace{State: StatePaused, BoxID: "b1", LastActivityAt: at.Add(time.Second)}
	if r := j.changedIn(same); r != "" {
		t.Errorf("unchanged box refused: %q", r)
	}
	cases := map[string]Workspace{
		"resumed":     {State: StateRunning, BoxID: "b1", LastActivityAt: at},
		"box changed": {State: StatePaused, BoxID: "b2", LastActivityAt: at},
		"used since":  {State: StatePaused, BoxID: "b1", LastActivityAt: at.Add(time.Minute)},
	}
	for want, cur := range cases {
		if r := j.changedIn(cur); !strings.Contains(r, want) {
			t.Errorf("%+v: %q, want it to say %q", cur, r, want)
		}
	}
	// A journal from before the pipeline has no observed state: accepted.
	if r := (&DeleteJournal{BoxID: "b1"}).changedIn(cases["resumed"]); r != "" {
		t.Errorf("legacy journal refused: %q", r)
	}
}

// TestExportModeDefaultsToRequired: only the explicit setting is
// best-effort.
func TestExportModeDefaultsToRequired(t *testing.T) {
	for _, m := range []DeleteExportMode{"", "required", "Best_Effort", "yes"} {
		if m.Effective() != DeleteExportRequired {
			t.Errorf("%q is %q, want required", m, m.Effective())
		}
	}
	if DeleteExportBestEffort.Effective() != DeleteExportBestEffort {
		t.Error("best_effort lost")
	}
}
