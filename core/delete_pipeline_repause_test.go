package core_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/exportrun"
	"github.com/canvasapp/companion/exports"
	"github.com/canvasapp/companion/internal/testsupport"
)

// TestBlockedDeletePausesWokenBoxAgain, against real Docker with the real
// exporter: a paused workspace whose agent-server refuses companion's key
// (401, capture unconfirmed) is woken for its delete's export, the
// required export blocks the delete, and the box is paused again by
// companion: the container is not running, the workspace is paused with
// stop reason companion, its error and the audit entry keep the 401 and
// say the box was paused again, and the journal is empty.
func TestBlockedDeletePausesWokenBoxAgain(t *testing.T) {
	e := newEnv(t)
	ws := e.create("repause")
	e.close()
	ctx := context.Background()

	// The service now reads a key the box's agent-server does not accept.
	secrets := &memSecrets{m: map[string]string{core.AgentKeyKey(ws.ID): "not-the-key"}}
	st, err := db.Open(ctx, filepath.Join(e.dir, "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var steps []string
	log := slog.New(slog.NewTextHandler(io.MultiWriter(e.logs), &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() { st.Close() })
	svc := newTestService(t, ctx, core.Config{Store: st, Providers: e.reg, Logger: log, MaxAttempts: 2, Secrets: secrets,
		Exporter: &exportrun.Exporter{Writer: &exports.Writer{Root: t.TempDir()}},
		StepHook: func(_ core.OpKind, step string) { mu.Lock(); steps = append(steps, step); mu.Unlock() }})
	if _, err := svc.Pause(ctx, "", ws.ID); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, ok func(core.Workspace) bool) core.Workspace {
		var cur core.Workspace
		testsupport.Poll(t, 2*time.Minute, func() error {
			cur, _ = svc.Workspace("", ws.ID)
			if !ok(cur) {
				return fmt.Errorf("not %s yet: %+v", what, cur)
			}
			return nil
		})
		return cur
	}
	waitFor("paused", func(w core.Workspace) bool { return w.State == core.StatePaused })

	pv, err := svc.PreviewDelete(ctx, "", ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Delete(ctx, "", ws.ID, pv.Token); err != nil {
		t.Fatal(err)
	}
	cur := waitFor("blocked", func(w core.Workspace) bool {
		return w.State != core.StateDeleting && strings.HasPrefix(w.Error, "delete blocked: ")
	})
	if cur.State != core.StatePaused || cur.StopReason != core.StopCompanion {
		t.Errorf("blocked workspace is %s (stop reason %q), want paused by companion\nlogs:\n%s", cur.State, cur.StopReason, e.logs)
	}
	if !strings.Contains(cur.Error, "401") || !strings.HasSuffix(cur.Error, "; the box was paused again") {
		t.Errorf("blocked workspace's error: %q", cur.Error)
	}
	box, err := e.prov.Get(ctx, e.acct, ws.BoxID)
	if err != nil || box.State == core.StateRunning {
		t.Errorf("the box after the blocked delete: %+v %v, want it not running", box, err)
	}
	mu.Lock()
	got := strings.Join(steps, " ")
	mu.Unlock()
	if !strings.Contains(got, "wake export repause") || strings.Contains(got, core.StepProviderDelete) {
		t.Errorf("steps %q, want the wake, the export, then the re-pause and no provider delete", got)
	}
	if ops, err := st.PendingOps(ctx); err != nil || len(ops) != 0 {
		t.Errorf("journal after the blocked delete: %+v %v", ops, err)
	}
	entries, err := st.ListAudit(ctx, "", 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	var outcome string
	for _, a := range entries {
		if a.Action == "delete" && a.WorkspaceID == ws.ID && outcome == "" {
			outcome = a.Outcome
		}
	}
	if !strings.HasPrefix(outcome, "blocked: ") || !strings.Contains(outcome, "401") || !strings.Contains(outcome, "paused again") {
		t.Errorf("delete audit outcome %q", outcome)
	}
}
