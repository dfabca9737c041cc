package core_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
)

// exportsSvc is a service over a real SQLite store, with no providers:
// enough for the export records' reads and recovery.
func exportsSvc(t *testing.T) (*core.Service, *db.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := db.Open(ctx, filepath.Join(t.TempDir(), "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := core.NewService(ctx, core.Config{Store: st, Providers: &core.Registry{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close(context.Background()) })
	return svc, st
}

// TestExportsAreOwnerScoped: another owner's export, its files and its
// workspace's export list answer not found, exactly like an unknown id.
func TestExportsAreOwnerScoped(t *testing.T) {
	ctx := context.Background()
	svc, st := exportsSvc(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "workspace.tar.gz"), []byte("archive bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rec := core.ExportRecord{ID: "exp_alice", WorkspaceID: "ws_gone", Owner: "alice", CreatedAt: now, UpdatedAt: now,
		State: core.ExportVerified, Verified: true, Dir: dir, Bytes: 13, ArchiveSHA256: "x",
		Files: []core.ExportFile{{Name: "workspace.tar.gz", Kind: "archive", Format: "tar.gz", Bytes: 13, SHA256: "x"}}}
	if err := st.PutExport(ctx, rec); err != nil {
		t.Fatal(err)
	}
	// The owner sees it, even after its workspace is gone.
	if got, err := svc.Export(ctx, "alice", rec.ID); err != nil || got.ID != rec.ID {
		t.Fatalf("owner's Export = %+v, %v", got, err)
	}
	if list, err := svc.Exports(ctx, "alice", "ws_gone"); err != nil || len(list) != 1 {
		t.Fatalf("owner's Exports = %+v, %v", list, err)
	}
	f, meta, err := svc.OpenExportFile(ctx, "alice", rec.ID, "workspace.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "archive bytes" || meta.SHA256 != "x" {
		t.Errorf("opened %q %+v", b, meta)
	}
	// Anyone else: not found, for every route.
	for _, who := range []string{"bob", ""} {
		if _, err := svc.Export(ctx, who, rec.ID); !core.IsKind(err, core.KindNotFound) {
			t.Errorf("%q reading alice's export: %v, want not found", who, err)
		}
		if _, _, err := svc.OpenExportFile(ctx, who, rec.ID, "workspace.tar.gz"); !core.IsKind(err, core.KindNotFound) {
			t.Errorf("%q opening alice's export file: %v, want not found", who, err)
		}
		if _, err := svc.Exports(ctx, who, "ws_gone"); !core.IsKind(err, core.KindNotFound) {
			t.Errorf("%q listing alice's workspace's exports: %v, want not found", who, err)
		}
	}
	// A file the record does not list is not served, even if on disk.
	if err := os.WriteFile(filepath.Join(dir, "other"), []byte("no"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"other", "../workspace.tar.gz"} {
		if _, _, err := svc.OpenExportFile(ctx, "alice", rec.ID, name); !core.IsKind(err, core.KindNotFound) {
			t.Errorf("opening unlisted %q: %v, want not found", name, err)
		}
	}
}

// TestRecoverExportsFailsRunning: an export a crash interrupted is failed
// at start-up and never becomes downloadable.
func TestRecoverExportsFailsRunning(t *testing.T) {
	ctx := context.Background()
	svc, st := exportsSvc(t)
	now := time.Now()
	rec := core.ExportRecord{ID: "exp_run", WorkspaceID: "ws_1", CreatedAt: now, UpdatedAt: now, State: core.ExportRunning}
	if err := st.PutExport(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.OpenExportFile(ctx, "", rec.ID, "manifest.json"); !core.IsKind(err, core.KindConflict) {
		t.Errorf("file of a running export: %v, want conflict", err)
	}
	if err := svc.RecoverExports(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := svc.Export(ctx, "", rec.ID)
	if err != nil || got.State != core.ExportFailed || got.Verified || got.Error == "" {
		t.Fatalf("after recovery: %+v, %v", got, err)
	}
}

// TestStartExportWithoutExporter: a companion built without exports says
// so instead of starting anything.
func TestStartExportWithoutExporter(t *testing.T) {
	svc, _ := exportsSvc(t)
	_, err := svc.StartExport(context.Background(), "", "ws_1", core.ExportOptions{})
	if !core.IsKind(err, core.KindUnavailable) {
		t.Fatalf("StartExport without an exporter: %v, want unavailable", err)
	}
}
