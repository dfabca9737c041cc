package docker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/providers/builtin/docker"
)

// TestStopReasons: a box whose process is killed from outside (no stop
// asked) is stopped/crashed with its exit code and no paused time; one
// stopped with `docker stop` is paused from outside with its stop time; a
// Suspend is a stop like docker's (core marks it as companion's).
func TestStopReasons(t *testing.T) {
	f := newFixture(t, docker.Config{})
	ctx := ctxT(t)

	crashed := f.create("ws_crash", nil)
	if _, err := f.cli.ContainerKill(ctx, crashed.ID, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	got := f.waitExited(crashed.ID)
	if got.State != core.StateStopped || got.StopReason != core.StopCrashed {
		t.Errorf("killed box: state %s reason %q; want stopped, crashed", got.State, got.StopReason)
	}
	if got.ExitCode == nil || *got.ExitCode != 137 {
		t.Errorf("killed box: exit code %v; want 137", got.ExitCode)
	}
	if !got.PausedAt.IsZero() {
		t.Errorf("killed box has a paused time %v; a crash is not a pause", got.PausedAt)
	}

	outside := f.create("ws_outside", nil)
	if _, err := f.cli.ContainerStop(ctx, outside.ID, client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}
	got = f.waitExited(outside.ID)
	if got.State != core.StatePaused || got.StopReason != core.StopOutside || got.PausedAt.IsZero() {
		t.Errorf("docker-stopped box: state %s reason %q paused_at %v; want paused, outside, set", got.State, got.StopReason, got.PausedAt)
	}

	mine := f.create("ws_suspended", nil)
	got, err := f.p.Suspend(ctx, f.acct, mine.ID)
	if err != nil || got.State != core.StatePaused || got.StopReason != core.StopOutside {
		t.Errorf("suspended box: %+v %v; want paused with a requested stop", got, err)
	}
	// Started again, it is running with no reason left over.
	got, err = f.p.Resume(ctx, f.acct, crashed.ID)
	if err != nil || got.State != core.StateRunning || got.StopReason != core.StopNone || got.ExitCode != nil {
		t.Errorf("resumed crashed box: %+v %v; want running, no reason, no exit code", got, err)
	}
}

func (f *fixture) waitExited(id string) core.Box {
	f.t.Helper()
	var b core.Box
	testsupport.Poll(f.t, 20*time.Second, func() error {
		var err error
		if b, err = f.p.Get(ctxT(f.t), f.acct, id); err != nil {
			f.t.Fatalf("get %s: %v", id, err)
		}
		if b.State == core.StateRunning || b.State == core.StateResuming {
			return fmt.Errorf("box %s still %s", id, b.State)
		}
		return nil
	})
	return b
}
