package core_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/exportrun"
	"github.com/canvasapp/companion/exports"
	"github.com/canvasapp/companion/internal/testsupport"
)

// openExporting opens a service on e's data dir with an exporter.
func openExporting(t *testing.T, e *env, reg *core.Registry, root string) (*core.Service, *db.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := db.Open(ctx, filepath.Join(e.dir, "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(e.logs), &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() { st.Close() })
	svc := newTestService(t, ctx, core.Config{Store: st, Providers: reg, Logger: log, MaxAttempts: 2,
		Exporter: &exportrun.Exporter{Writer: &exports.Writer{Root: root}}})
	return svc, st
}

func waitExportDone(t *testing.T, svc *core.Service, id string) core.ExportRecord {
	t.Helper()
	var rec core.ExportRecord
	testsupport.Poll(t, 2*time.Minute, func() error {
		var err error
		if rec, err = svc.Export(context.Background(), "", id); err == nil && rec.State == core.ExportRunning {
			return errNotYet
		}
		return err
	})
	return rec
}

// TestExportJournaledAgainstDocker: with a real Docker box and the real
// exporter, a provider that cannot say how to reach its boxes fails the
// export clearly; one that can gets a verified export with the archive's
// hash in the audit trail; the journal is empty afterwards and the
// progress line cleared; a paused box is refused without wake.
func TestExportJournaledAgainstDocker(t *testing.T) {
	e := newEnv(t)
	ws := e.create("export")
	e.close()
	ctx := context.Background()
	root := t.TempDir()

	// Embedding only core.Provider hides the adapter's EndpointReporter.
	bare := &core.Registry{}
	bare.Register("docker", struct{ core.Provider }{e.prov})
	svc, st := openExporting(t, e, bare, root)
	rec, err := svc.StartExport(ctx, "", ws.ID, core.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec = waitExportDone(t, svc, rec.ID)
	if rec.State != core.ExportFailed || rec.Verified || !strings.Contains(rec.Error, "cannot say where a box's agent-server is") {
		t.Fatalf("export through a provider without endpoints: %+v", rec)
	}
	ctxc, cancel := context.WithTimeout(ctx, 30*time.Second)
	svc.Close(ctxc)
	cancel()
	st.Close()

	reg := &core.Registry{}
	reg.Register("docker", e.prov)
	svc, st = openExporting(t, e, reg, root)
	rec, err = svc.StartExport(ctx, "", ws.ID, core.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec = waitExportDone(t, svc, rec.ID)
	if !rec.Verified || rec.ArchiveSHA256 == "" || rec.Dir == "" {
		t.Fatalf("export: %+v\nlogs:\n%s", rec, e.logs)
	}
	// The journal entry is dropped just after the record turns verified
	// (and the outcome audited).
	testsupport.Poll(t, 10*time.Second, func() error {
		ops, err := st.PendingOps(ctx)
		if err != nil || len(ops) != 0 {
			return fmt.Errorf("journal after the export: %+v %v", ops, err)
		}
		return nil
	})
	if cur, _ := svc.Workspace("", ws.ID); cur.Progress != "" {
		t.Errorf("progress left on the workspace: %q", cur.Progress)
	}
	// The outcome entry is appended just after the record turns verified.
	var entries []core.AuditEntry
	var outcomes []string
	testsupport.Poll(t, 10*time.Second, func() error {
		var err error
		if entries, err = st.ListAudit(ctx, "", 0, 50); err != nil {
			return err
		}
		outcomes = outcomes[:0]
		for _, a := range entries {
			if a.Action == core.AuditExport {
				outcomes = append(outcomes, a.Outcome)
			}
		}
		if len(outcomes) < 4 {
			return errNotYet
		}
		return nil
	})
	for _, a := range entries {
		if a.Action == core.AuditExport && a.Outcome == "ok" && a.ExportSHA256 != rec.ArchiveSHA256 {
			t.Errorf("audit entry %+v lacks the archive's hash %s", a, rec.ArchiveSHA256)
		}
	}
	// Newest first: this run's ok and started, the first run's failed and started.
	if len(outcomes) != 4 || outcomes[0] != "ok" || outcomes[1] != "started" || !strings.HasPrefix(outcomes[2], "failed: ") {
		t.Errorf("export audit outcomes %v", outcomes)
	}

	if _, err := svc.Pause(ctx, "", ws.ID); err != nil {
		t.Fatal(err)
	}
	testsupport.Poll(t, time.Minute, func() error {
		if cur, _ := svc.Workspace("", ws.ID); cur.State != core.StatePaused {
			return errNotYet
		}
		return nil
	})
	_, err = svc.StartExport(ctx, "", ws.ID, core.ExportOptions{})
	if !core.IsKind(err, core.KindConflict) || !strings.Contains(err.Error(), "wake=true") {
		t.Errorf("export of a paused box without wake: %v", err)
	}
	if list, _ := svc.Exports(ctx, "", ws.ID); len(list) != 2 {
		t.Errorf("a refused export made a record: %d records", len(list))
	}
}
