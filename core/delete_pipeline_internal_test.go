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

// TestPreviewOfAStoppedBox: a crashed (stopped) box is woken for the
// export, but the preview never calls it paused nor claims a pause kept
// memory; best-effort says everything is lost if the export fails.
func TestPreviewOfAStoppedBox(t *testing.T) {
	ws := Workspace{BoxID: "b1", Provider: "docker", State: StateStopped}
	ex := DeleteExportPlan{Will: true, Wake: true, Mode: DeleteExportBestEffort, ArchivePath: ArchivePath, Location: "/x/ws/",
		Captures: []string{"the box is stopped: it is woken for the export"}}
	lost, survives := consequences(ws, ProviderInfo{Capabilities: Capabilities{SuspendKeepsMemory: true}}, ex)
	all := strings.Join(append(lost, survives...), "\n")
	if strings.Contains(all, "pause") {
		t.Errorf("a stopped box is described as paused: %s", all)
	}
	for _, want := range []string{"outside /workspace", "best_effort", "/x/ws/", "pushed"} {
		if !strings.Contains(all, want) {
			t.Errorf("preview does not say %q: %s", want, all)
		}
	}
}
