package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDeleteDockerCorruptReadBackBlocks, through the binary and real
// Docker: companion is killed right after journaling the verify step, the
// verified archive on disk is then corrupted, and after a restart the
// pipeline's read-back finds the mismatch: the delete is blocked, the
// container stays, the export is no longer listed as verified. Deleting
// again makes a new export, verifies it and removes the container.
func TestDeleteDockerCorruptReadBackBlocks(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	dataDir := t.TempDir()
	args := []string{"--docker-image", image, "--docker-scope", scope}
	p := start(t, options{dataDir: dataDir, args: args, env: []string{"COMPANION_TEST_CRASH_AT=delete:verify"}})
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "corrupt"}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", 90*time.Second).BoxID
	previewAndDeleteCrashing(p, id)
	select {
	case <-p.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("companion did not crash at the verify step\n%s", p.stderr.String())
	}
	archives, _ := filepath.Glob(filepath.Join(dataDir, "exports", id, "*", "workspace.tar.gz"))
	if len(archives) != 1 {
		t.Fatalf("verified archives on disk after the crash: %v", archives)
	}
	b, err := os.ReadFile(archives[0])
	if err != nil || len(b) < 2 {
		t.Fatalf("read %s: %v", archives[0], err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(archives[0], b, 0o600); err != nil {
		t.Fatal(err)
	}

	p = start(t, options{dataDir: dataDir, args: args})
	ws := p.waitBlocked(id, 2*time.Minute)
	if ws.State != "running" || !strings.Contains(ws.Error, "read back") {
		t.Fatalf("after a corrupt read-back the workspace is %+v", ws)
	}
	if !containerExists(t, box) {
		t.Fatal("the box was deleted although its export did not read back")
	}
	if e := p.deleteAudit(id); !strings.HasPrefix(e.Outcome, "blocked: ") {
		t.Errorf("audit %+v, want blocked", e)
	}
	if v := p.verifiedExports(id); len(v) != 0 {
		t.Errorf("the corrupt export is still listed as verified: %+v", v)
	}

	p.deleteConfirmed(id)
	p.waitRemoved(id, 3*time.Minute)
	if containerExists(t, box) {
		t.Fatal("the second delete did not remove the box")
	}
	if v := p.verifiedExports(id); len(v) != 1 {
		t.Errorf("after the second delete, verified exports: %+v", v)
	}
}

// TestDeleteDockerExportLocationFullBlocks: with an export location that
// cannot hold the archive (a 256 KiB tmpfs when the test runs as root,
// else a read-only directory), a required export fails, the delete is
// blocked with the location's reason, the container survives and nothing
// is left half-written in the export directory.
func TestDeleteDockerExportLocationFullBlocks(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	dir := t.TempDir()
	want := "full"
	if os.Geteuid() == 0 {
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", dir).CombinedOutput(); err != nil {
			t.Fatalf("mount a small tmpfs: %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", dir).Run() })
	} else {
		want = "not writable"
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
	}
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-image", image, "--docker-scope", scope, "--export-dir", dir}})
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "full"}, &created)
	id := created.Workspace.ID
	box := p.waitState(id, "running", 90*time.Second).BoxID
	putBigFile(t, box, 2<<20)
	pv := p.deleteConfirmed(id)
	if !pv.Export.Will || !strings.Contains(pv.Export.Location, dir) {
		t.Errorf("preview's export plan %+v does not name %s", pv.Export, dir)
	}
	ws := p.waitBlocked(id, 2*time.Minute)
	if ws.State != "running" || !strings.Contains(ws.Error, want) {
		t.Fatalf("blocked workspace %+v; want running and %q", ws, want)
	}
	if !containerExists(t, box) {
		t.Fatal("the box was deleted although its export failed")
	}
	left, _ := filepath.Glob(filepath.Join(dir, id, "*"))
	hidden, _ := filepath.Glob(filepath.Join(dir, id, ".*"))
	if len(left)+len(hidden) != 0 {
		t.Errorf("the failed export left %v %v", left, hidden)
	}
}
