package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/dockertest"
)

// restorePreview is the wire form of GET /v1/exports/{id}/restore-preview.
type restorePreview struct {
	AccountID  string   `json:"account_id"`
	Provider   string   `json:"provider"`
	Method     string   `json:"method"`
	Dest       *string  `json:"dest"`
	Files      int64    `json:"files"`
	BringsBack []string `json:"brings_back"`
	Cannot     []string `json:"cannot"`
}

// restoreInto previews and then restores export e into account (""
// lets companion choose) with method ("" likewise), waits for the new
// workspace to run, and returns it with the preview.
func (p *proc) restoreInto(e exportRec, account, method string) (workspace, restorePreview) {
	p.t.Helper()
	var pv struct{ Restore restorePreview }
	p.must(200, "GET", "/v1/exports/"+e.ID+"/restore-preview?account_id="+account+"&method="+method, nil, &pv)
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/exports/"+e.ID+"/restore", map[string]string{"account_id": account, "method": method}, &created)
	ws := p.waitState(created.Workspace.ID, "running", 3*time.Minute)
	return ws, pv.Restore
}

// TestDeleteKeepsEverythingAndRestoresAnywhere: the workspace of issue
// 20 (a git repository at /workspace/repo with uncommitted work, and
// beside it notes.txt and data/blob.bin), in a Docker box, is deleted;
// its export holds all three, the box's snapshot and the git delta; it is
// restored three ways, each into a running box that holds the three: from
// the snapshot into Docker, file by file into Docker, and file by file
// into a Daytona box (the emulator), whose disk is compared with the
// export's archive file by file.
func TestDeleteKeepsEverythingAndRestoresAnywhere(t *testing.T) {
	image := dockertest.BoxImageEnv(t, map[string]string{"EMULATOR_SEED_REPO": "/workspace/repo", "EMULATOR_IDLE_AT_START_SECONDS": "3600"})
	f := newFarm(t)
	f.noSeed = true
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-image", image, "--docker-scope", dockerScope(t)}})
	acct := f.account(p)

	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "keeps everything"}, &created)
	id := created.Workspace.ID
	ws := p.waitState(id, "running", 90*time.Second)
	waitReady(t, ws.BoxURL)
	blob := randomBytes(200 << 10)
	putTree(t, ws.BoxID, "/workspace", map[string]string{"notes.txt": "notes beside the repository\n", "data/blob.bin": blob})

	pv := p.deleteConfirmed(id)
	if !pv.Export.Will || !pv.Export.Snapshot {
		t.Errorf("the preview does not plan an export with the box's snapshot: %+v", pv.Export)
	}
	p.waitRemoved(id, 3*time.Minute)
	exps := p.verifiedExports(id)
	if len(exps) != 1 {
		t.Fatalf("verified exports: %+v", exps)
	}
	exp := exps[0]
	kinds := map[string]bool{}
	for _, fl := range exp.Files {
		kinds[fl.Name] = true
	}
	for _, want := range []string{"workspace.tar.gz", "workspace.files.jsonl", "workspace.git-delta", "docker.json", "manifest.json"} {
		if !kinds[want] {
			t.Errorf("the delete's export has no %s: %+v", want, exp.Files)
		}
	}
	files, _ := p.exportArchive(exp)
	want := map[string]string{"notes.txt": "notes beside the repository\n", "data/blob.bin": blob,
		"repo/notes.md": "uncommitted notes\n"}
	for path, body := range want {
		if files[path] != body {
			t.Errorf("the export's archive has %s as %d bytes, want %d", path, len(files[path]), len(body))
		}
	}
	if !strings.Contains(files["repo/README.md"], "Work in progress.") {
		t.Errorf("the repository's uncommitted edit is not in the export: %q", files["repo/README.md"])
	}
	want["repo/README.md"] = files["repo/README.md"]

	// From the snapshot, into Docker (the account the workspace was in).
	snap, spv := p.restoreInto(exp, "", "")
	if spv.Method != "snapshot" || spv.Provider != "docker" {
		t.Errorf("restore preview without an account: %+v", spv)
	}
	dockerHas(t, snap.BoxID, want)

	// File by file, into Docker.
	byFiles, fpv := p.restoreInto(exp, "local-docker", "files")
	if fpv.Method != "files" || fpv.Dest == nil || *fpv.Dest != "/workspace" || fpv.Files != int64(len(files)) {
		t.Errorf("files restore preview: %+v (the archive holds %d files)", fpv, len(files))
	}
	if c := strings.Join(fpv.Cannot, "\n"); !strings.Contains(c, "processes and memory") || !strings.Contains(c, "symbolic links") {
		t.Errorf("the preview does not say what cannot come back: %v", fpv.Cannot)
	}
	dockerHas(t, byFiles.BoxID, want)

	// File by file, into a Daytona box.
	day, dpv := p.restoreInto(exp, acct, "")
	if dpv.Method != "files" || dpv.Provider != "daytona" {
		t.Errorf("restore preview into daytona: %+v", dpv)
	}
	got := hostTree(t, f.workspaceDir(day.BoxID))
	for path, body := range files {
		if strings.HasPrefix(path, "bash_events/") {
			continue // hostTree leaves the agent-server's command record out
		}
		if got[path] != body {
			t.Errorf("the Daytona box has %s as %d bytes, want %d", path, len(got[path]), len(body))
		}
	}
	restored := false
	for _, e := range p.auditOf(day.ID) {
		restored = restored || e.Action == "restore" && strings.HasPrefix(e.Outcome, "ok")
	}
	if !restored {
		t.Errorf("no ok restore in the audit trail of %s: %+v", day.ID, p.auditOf(day.ID))
	}
}

// TestRestoreDaytonaExportIntoDocker: a Daytona workspace with files
// beside its repository, an executable script and an empty directory is
// deleted; its export restores file by file into a Docker box, which then
// holds every file of the export.
func TestRestoreDaytonaExportIntoDocker(t *testing.T) {
	f := newFarm(t)
	f.noSeed = true
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-image", boxImage(t), "--docker-scope", dockerScope(t)}})
	acct := f.account(p)
	l := layouts()[0]
	id, box := f.workspaceWith(p, acct, l.name, l.make)
	writeTree(t, f.workspaceDir(box), map[string]string{"bin/run.sh": "#!/bin/sh\necho hi\n"})
	p.deleteConfirmed(id)
	p.waitRemoved(id, 2*time.Minute)
	exps := p.verifiedExports(id)
	if len(exps) != 1 {
		t.Fatalf("verified exports: %+v", exps)
	}
	files, _ := p.exportArchive(exps[0])
	ws, pv := p.restoreInto(exps[0], "local-docker", "")
	if pv.Method != "files" || pv.Provider != "docker" {
		t.Errorf("restore preview: %+v", pv)
	}
	dockerHas(t, ws.BoxID, files)
}

// TestFilesRestoreKilledMidway: a restore file by file into Docker is
// killed (SIGKILL) while it uploads; the next start resumes it, finds the
// box it had made by its label, and finishes: one container, every file
// back with its content, the executable one with its bit.
func TestFilesRestoreKilledMidway(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	dataDir := t.TempDir()
	args := []string{"--docker-image", image, "--docker-scope", scope}
	p := start(t, options{dataDir: dataDir, args: args})
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "many files"}, &created)
	ws := p.waitState(created.Workspace.ID, "running", 90*time.Second)
	files := map[string]string{}
	for i := range 2000 {
		files[fmt.Sprintf("dir%02d/file %03d.txt", i%17, i)] = fmt.Sprintf("file %d\n%s", i, randomBytes(i%50*37))
	}
	putTree(t, ws.BoxID, "/workspace", files)
	if err := dockertest.PutFiles(context.Background(), dockerCLI(t), ws.BoxID, "/workspace", map[string]string{"tool.sh": "#!/bin/sh\n"}, 0o755); err != nil {
		t.Fatal(err)
	}
	files["tool.sh"] = "#!/bin/sh\n"
	rec := p.exportVerified(ws.ID)

	s := p.dial(-1)
	s.next(10 * time.Second)
	var restored struct{ Workspace workspace }
	p.must(202, "POST", "/v1/exports/"+rec.ID+"/restore", map[string]string{"method": "files"}, &restored)
	nid := restored.Workspace.ID
	s.waitProgress("upload progress", nid, 2*time.Minute, func(pr string) bool {
		return strings.Contains(pr, "files,") && !strings.HasPrefix(pr, "restore: 0 files")
	})
	p.kill()

	p = start(t, options{dataDir: dataDir, args: args})
	nws := p.waitState(nid, "running", 3*time.Minute)
	if log := p.stderr.String(); !strings.Contains(log, `"msg":"resuming interrupted action","workspace":"`+nid+`","action":"restore"`) {
		t.Errorf("the restart did not resume the restore:\n%s", log)
	}
	dockerHas(t, nws.BoxID, files)
	st, err := dockerCLI(t).ContainerStatPath(context.Background(), nws.BoxID, client.ContainerStatPathOptions{Path: "/workspace/tool.sh"})
	if err != nil || st.Stat.Mode.Perm()&0o111 == 0 {
		t.Errorf("tool.sh lost its executable bit: %+v %v", st.Stat, err)
	}
	res, err := dockerCLI(t).ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "companion.workspace="+nid)})
	if err != nil || len(res.Items) != 1 || res.Items[0].ID != nws.BoxID {
		t.Fatalf("containers of the restored workspace: %+v, %v", res.Items, err)
	}
}

// dockerHas checks that the box holds each file below /workspace.
func dockerHas(t *testing.T, boxID string, files map[string]string) {
	t.Helper()
	got, _, err := dockertest.ReadTree(context.Background(), dockerCLI(t), boxID, "/workspace")
	if err != nil {
		t.Fatal(err)
	}
	for path, body := range files {
		if got[path] != body {
			t.Errorf("box %s: /workspace/%s is %d bytes, want %d", boxID[:12], path, len(got[path]), len(body))
		}
	}
}

// waitReady waits until the box's agent-server answers /ready.
func waitReady(t *testing.T, url string) {
	t.Helper()
	testsupport.Poll(t, 30*time.Second, func() error {
		resp, err := http.Get(url + "/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("ready: %d", resp.StatusCode)
		}
		return nil
	})
}
