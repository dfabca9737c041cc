package core_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/providers/builtin/docker"
)

// TestRestoreRefusals: a restore of an unknown or another owner's export is
// not found; an unverified export is a conflict; an export with neither a
// workspace archive nor a snapshot is invalid, and so is one no account
// can restore. None of them makes a workspace or a journal entry.
func TestRestoreRefusals(t *testing.T) {
	ctx := context.Background()
	svc, st := exportsSvc(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "docker.json"), []byte("{}"), 0o600)
	now := time.Now()
	put := func(id string, state string, files []core.ExportFile) {
		rec := core.ExportRecord{ID: id, WorkspaceID: "ws_gone", Owner: "alice", CreatedAt: now, UpdatedAt: now,
			State: state, Verified: state == core.ExportVerified, Files: files}
		if rec.Verified {
			rec.Dir = dir
		}
		if err := st.PutExport(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	put("exp_plain", core.ExportVerified, []core.ExportFile{{Name: "workspace.tar.gz", Kind: "archive", Bytes: 1, SHA256: "x"}})
	put("exp_failed", core.ExportFailed, nil)
	put("exp_damaged", core.ExportVerified, []core.ExportFile{{Name: "docker.json", Kind: core.ExportKindSnapshot, Bytes: 2,
		SHA256: strings.Repeat("0", 64)}})
	cases := []struct {
		owner, id string
		kind      core.ErrorKind
		says      string
	}{
		{"alice", "exp_nope", core.KindNotFound, "not found"},
		{"bob", "exp_damaged", core.KindNotFound, "not found"},
		{"alice", "exp_failed", core.KindConflict, "not verified"},
		{"alice", "exp_plain", core.KindInvalid, "holds neither a workspace archive nor a box snapshot"},
	}
	for _, c := range cases {
		_, err := svc.RestoreExport(ctx, c.owner, c.id, core.RestoreRequest{})
		if !core.IsKind(err, c.kind) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s restoring %s: %v, want %s saying %q", c.owner, c.id, err, c.kind, c.says)
		}
	}
	// The damaged one gets as far as the hash check only with an account
	// that can restore; without one it says so.
	if _, err := svc.RestoreExport(ctx, "alice", "exp_damaged", core.RestoreRequest{}); !core.IsKind(err, core.KindInvalid) || !strings.Contains(err.Error(), "add an account whose boxes run an agent-server") {
		t.Errorf("restore with no account that can restore: %v", err)
	}
	if ws, _ := st.ListWorkspaces(ctx); len(ws) != 0 {
		t.Errorf("refused restores made workspaces: %+v", ws)
	}
	if ops, _ := st.PendingOps(ctx); len(ops) != 0 {
		t.Errorf("refused restores left journal entries: %+v", ops)
	}
}

// TestRestoreRecoversAfterCrash: against the real engine, an export of a
// Docker workspace is restored by a restore that a crash interrupted after
// its container was created but before it was started (the journal entry,
// the restore row and the creating workspace are what a crash leaves).
// Recover runs it again: the unstarted container is replaced, the new box
// runs with the file, and a damaged snapshot refuses a fresh restore
// without making anything.
func TestRestoreRecoversAfterCrash(t *testing.T) {
	e := newEnv(t)
	ws := e.create("original")
	ctx := context.Background()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "kept.txt", Mode: 0o644, Size: 4, Typeflag: tar.TypeReg})
	tw.Write([]byte("kept"))
	tw.Close()
	if _, err := cli.CopyToContainer(ctx, ws.BoxID, client.CopyToContainerOptions{DestinationPath: "/workspace", Content: &buf}); err != nil {
		t.Fatal(err)
	}
	ins, err := cli.ContainerInspect(ctx, ws.BoxID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scope := ins.Container.Config.Labels[docker.LabelScope]
	e.close()

	root := t.TempDir()
	reg := &core.Registry{}
	reg.Register("docker", e.prov)
	svc, st := openExporting(t, e, reg, root)
	rec, err := svc.StartExport(ctx, "", ws.ID, core.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec = waitExportDone(t, svc, rec.ID)
	if !rec.Restorable() {
		t.Fatalf("export of a docker workspace is not restorable: %+v\n%s", rec, e.logs)
	}

	// What a crash mid-restore leaves behind.
	now := time.Now().UTC()
	rid := core.NewID("ws")
	if _, err := st.SaveWorkspace(ctx, core.Workspace{ID: rid, Name: "restored", AccountID: e.acct.ID, Provider: "docker",
		State: core.StateCreating, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutRestore(ctx, core.RestoreRecord{WorkspaceID: rid, ExportID: rec.ID, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutOp(ctx, core.Op{WorkspaceID: rid, Kind: core.OpRestore, Step: "provider_restore", Attempts: 1, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	half, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: "companion-" + rid, Config: &container.Config{
		Image: ins.Container.Image, Labels: map[string]string{docker.LabelBox: "1", docker.LabelScope: scope, core.LabelWorkspace: rid}}})
	if err != nil {
		t.Fatal(err)
	}
	ctxc, cancel := context.WithTimeout(ctx, 30*time.Second)
	svc.Close(ctxc)
	cancel()
	st.Close()

	svc, st = openExporting(t, e, reg, root)
	if err := svc.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if err := svc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	var got core.Workspace
	if testsupport.PollErr(2*time.Minute, func() error {
		if got, err = svc.Workspace("", rid); err == nil && got.State == core.StateRunning {
			return nil
		}
		return errNotYet
	}) != nil {
		t.Fatalf("recovered restore did not run: %+v, %v\nlogs:\n%s", got, err, e.logs)
	}
	if got.BoxID == "" || got.BoxID == half.ID || got.BoxID == ws.BoxID {
		t.Fatalf("recovered restore's box %s (half-made %s, original %s)", got.BoxID, half.ID, ws.BoxID)
	}
	if _, err := cli.ContainerInspect(ctx, half.ID, client.ContainerInspectOptions{}); err == nil {
		t.Error("the half-made container of the interrupted restore is still there")
	}
	res, err := cli.CopyFromContainer(ctx, got.BoxID, client.CopyFromContainerOptions{SourcePath: "/workspace/kept.txt"})
	if err != nil {
		t.Fatalf("restored box lacks the file: %v", err)
	}
	tr := tar.NewReader(res.Content)
	tr.Next()
	b, _ := io.ReadAll(tr)
	res.Content.Close()
	if string(b) != "kept" {
		t.Errorf("restored file holds %q", b)
	}
	if ops, _ := st.PendingOps(ctx); len(ops) != 0 {
		t.Errorf("journal after the recovered restore: %+v", ops)
	}

	// Damage the layer: a fresh restore is refused and makes nothing.
	before, _ := st.ListWorkspaces(ctx)
	os.WriteFile(filepath.Join(rec.Dir, docker.SnapshotLayerName), []byte("damaged"), 0o600)
	_, err = svc.RestoreExport(ctx, "", rec.ID, core.RestoreRequest{Name: "again"})
	if !core.IsKind(err, core.KindConflict) || !strings.Contains(err.Error(), docker.SnapshotLayerName) {
		t.Fatalf("restore of a damaged export: %v", err)
	}
	if after, _ := st.ListWorkspaces(ctx); len(after) != len(before) {
		t.Errorf("a refused restore made a workspace: %d before, %d after", len(before), len(after))
	}
}
