package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/canvasapp/companion/e2e/boximage"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/dockertest"
)

// putTree writes files (path → content, paths relative to dest) into a
// container through the Engine API, making the directories on the way.
func putTree(t *testing.T, boxID, dest string, files map[string]string) {
	t.Helper()
	if err := dockertest.PutFiles(context.Background(), dockerCLI(t), boxID, dest, files, 0o640); err != nil {
		t.Fatalf("write files into box %s: %v", boxID, err)
	}
}

// boxFile reads one file of a container through the Engine API.
func boxFile(t *testing.T, boxID, p string) (string, error) {
	t.Helper()
	return dockertest.ReadFile(context.Background(), dockerCLI(t), boxID, p)
}

// scopeBoxes lists the containers of a docker scope, straight from the
// engine.
func scopeBoxes(t *testing.T, scope string) []string {
	t.Helper()
	res, err := dockerCLI(t).ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "companion.scope="+scope)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range res.Items {
		ids = append(ids, c.ID)
	}
	return ids
}

// TestRestoreDockerWorkspace: through the binary and real Docker, files are
// written into a workspace's volume (/workspace) and into its container's
// own filesystem (/srv/..., /notes-at-root.txt); the workspace is exported
// (the export holds the snapshot files, says it is restorable, and its
// docker.json carries no agent key), deleted through preview and token,
// and restored: a new workspace with a new box and a new key, whose
// container holds the files again, with progress on the stream and an
// audit entry naming the export's SHA-256. A restore of an unknown export
// is 404; malformed bodies are 400; a snapshot file corrupted on disk
// makes the restore refuse (409) and nothing is created.
func TestRestoreDockerWorkspace(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	dataDir := t.TempDir()
	p := start(t, options{dataDir: dataDir, args: []string{"--docker-image", image, "--docker-scope", scope}})
	s := p.dial(-1)
	s.next(10 * time.Second)

	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "to restore"}, &created)
	id := created.Workspace.ID
	ws := p.waitState(id, "running", 90*time.Second)
	oldKey := boxKey(t, ws.BoxID)
	want := map[string]string{
		"/workspace/project/main.go": "package main\n",
		"/workspace/notes.txt":       "uncommitted notes",
		"/srv/cache/deep/state.json": `{"kept":true}`,
		"/notes-at-root.txt":         "outside the workspace",
	}
	putTree(t, ws.BoxID, "/workspace", map[string]string{"project/main.go": want["/workspace/project/main.go"], "notes.txt": want["/workspace/notes.txt"]})
	putTree(t, ws.BoxID, "/", map[string]string{"srv/cache/deep/state.json": want["/srv/cache/deep/state.json"], "notes-at-root.txt": want["/notes-at-root.txt"]})
	// A file of the image, deleted in the box the way a person would:
	// the restored box must not have it again.
	if got, err := boxFile(t, ws.BoxID, boximage.ImageFile); err != nil || got != boximage.ImageFileContent {
		t.Fatalf("the box image's %s = %q, %v", boximage.ImageFile, got, err)
	}
	if code, out, err := dockertest.Exec(context.Background(), dockerCLI(t), ws.BoxID, "rm", boximage.ImageFile); err != nil || code != 0 {
		t.Fatalf("rm %s in the box: %d %q %v", boximage.ImageFile, code, out, err)
	}

	var started struct{ Export exportRec }
	p.must(202, "POST", "/v1/workspaces/"+id+"/export", nil, &started)
	rec := p.waitExport(started.Export.ID, 2*time.Minute)
	if !rec.Verified {
		t.Fatalf("export did not verify: %+v\n%s", rec, p.stderr.String())
	}
	var restorable struct {
		Export struct {
			Restorable bool `json:"restorable"`
		}
	}
	p.must(200, "GET", "/v1/exports/"+rec.ID, nil, &restorable)
	if !restorable.Export.Restorable {
		t.Fatalf("export of a docker workspace is not restorable: %+v", rec)
	}
	snap := map[string]exportFile{}
	for _, f := range rec.Files {
		if f.Kind == "snapshot" {
			snap[f.Name] = f
		}
	}
	for _, n := range []string{"docker.json", "docker-rootfs.tar", "docker-volume-0.tar"} {
		if _, ok := snap[n]; !ok {
			t.Fatalf("export lacks snapshot file %s: %+v", n, rec.Files)
		}
	}
	resp, meta := p.get(snap["docker.json"].URL, nil)
	if resp.StatusCode != 200 || sum(meta) != snap["docker.json"].SHA256 {
		t.Fatalf("docker.json download: %d", resp.StatusCode)
	}
	if strings.Contains(string(meta), oldKey) {
		t.Fatal("docker.json holds the box's agent-server key")
	}
	for _, n := range []string{"docker-rootfs.tar", "docker-volume-0.tar"} {
		_, body := p.get(snap[n].URL, nil)
		if bytes.Contains(body, []byte(oldKey)) {
			t.Fatalf("%s holds the box's agent-server key", n)
		}
	}

	// Delete the workspace the way a person does.
	p.deleteConfirmed(id)
	p.waitRemoved(id, 60*time.Second)
	if containerExists(t, ws.BoxID) {
		t.Fatalf("box %s survived the delete", ws.BoxID)
	}

	// Bad input loses nothing and makes nothing.
	p.must(404, "POST", "/v1/exports/exp_doesnotexist/restore", nil, nil)
	if code, raw := p.call("POST", "/v1/exports/"+rec.ID+"/restore", map[string]any{"name": 42}, nil); code != 400 {
		t.Errorf("restore with a malformed body: %d %s, want 400", code, raw)
	}
	if code, raw := p.call("POST", "/v1/exports/"+rec.ID+"/restore", map[string]any{"account_id": "acc_nope"}, nil); code != 404 {
		t.Errorf("restore onto an unknown account: %d %s, want 404", code, raw)
	}
	if got := scopeBoxes(t, scope); len(got) != 0 {
		t.Fatalf("refused restores left containers: %v", got)
	}

	var restored struct{ Workspace workspace }
	p.must(202, "POST", "/v1/exports/"+rec.ID+"/restore", map[string]any{"name": "restored"}, &restored)
	nid := restored.Workspace.ID
	if nid == id || restored.Workspace.State != "creating" || restored.Workspace.Name != "restored" {
		t.Fatalf("restore answered %+v", restored.Workspace)
	}
	s.waitProgress("restore progress", nid, 60*time.Second, func(pr string) bool { return strings.HasPrefix(pr, "restore: ") })
	nws := p.waitState(nid, "running", 2*time.Minute)
	if nws.BoxID == "" || nws.BoxID == ws.BoxID {
		t.Fatalf("restored workspace's box: %+v", nws)
	}
	if k := boxKey(t, nws.BoxID); k == oldKey || k == "" {
		t.Error("the restored box reuses the old agent-server key")
	}
	for path, content := range want {
		got, err := boxFile(t, nws.BoxID, path)
		if err != nil || got != content {
			t.Errorf("restored box's %s = %q, %v; want %q", path, got, err, content)
		}
	}
	if got, err := boxFile(t, nws.BoxID, boximage.ImageFile); err == nil {
		t.Errorf("the restored box has %s again (%q): the snapshotted box had deleted it", boximage.ImageFile, got)
	}
	var audit struct {
		Entries []struct {
			Action, Outcome string
			WorkspaceID     string  `json:"workspace_id"`
			ExportSHA256    *string `json:"export_sha256"`
		}
	}
	// The outcome is audited just after the workspace's last change.
	testsupport.Poll(t, 30*time.Second, func() error {
		p.must(200, "GET", "/v1/audit", nil, &audit)
		for _, e := range audit.Entries {
			if e.Action == "restore" && e.Outcome == "ok" && e.WorkspaceID == nid && e.ExportSHA256 != nil && rec.ArchiveSHA256 != nil && *e.ExportSHA256 == *rec.ArchiveSHA256 {
				return nil
			}
		}
		return fmt.Errorf("no audit entry for the restore with the export's SHA-256: %+v", audit.Entries)
	})

	// A snapshot file damaged on disk: the restore is refused, nothing
	// made. (The delete's own export holds a snapshot too.)
	layers, _ := filepath.Glob(filepath.Join(exportDir(t, dataDir, rec), "docker-rootfs.tar"))
	if len(layers) != 1 {
		t.Fatalf("export directory holds %v", layers)
	}
	f, err := os.OpenFile(layers[0], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("X"), 600)
	f.Close()
	var before struct{ Workspaces []workspace }
	p.must(200, "GET", "/v1/workspaces", nil, &before)
	code, raw := p.call("POST", "/v1/exports/"+rec.ID+"/restore", nil, nil)
	if code != 409 || !strings.Contains(string(raw), "docker-rootfs.tar") || !strings.Contains(string(raw), "SHA-256") {
		t.Fatalf("restore of a damaged export: %d %s, want 409 naming the file", code, raw)
	}
	var after struct{ Workspaces []workspace }
	p.must(200, "GET", "/v1/workspaces", nil, &after)
	if len(after.Workspaces) != len(before.Workspaces) {
		t.Errorf("a refused restore created a workspace: %d before, %d after", len(before.Workspaces), len(after.Workspaces))
	}
	if got := scopeBoxes(t, scope); len(got) != 1 || got[0] != nws.BoxID {
		t.Errorf("containers after the refused restore: %v, want only %s", got, nws.BoxID)
	}
}

// exportDir finds the directory of export rec under the data dir's
// exports: the one whose manifest.json has the SHA-256 the record lists.
func exportDir(t *testing.T, dataDir string, rec exportRec) string {
	t.Helper()
	want := ""
	for _, f := range rec.Files {
		if f.Name == "manifest.json" {
			want = f.SHA256
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(dataDir, "exports", rec.WorkspaceID, "2*"))
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, "manifest.json")); err == nil && sum(b) == want {
			return d
		}
	}
	t.Fatalf("no directory of export %s among %v", rec.ID, dirs)
	return ""
}

// TestRestoreKilledMidway: companion is killed (SIGKILL) while a restore
// uploads a 64 MiB volume; after a restart the restore finishes on its own
// (the journal and the labelled container carry it): the new workspace
// runs with the whole file, and exactly one container carries its label.
func TestRestoreKilledMidway(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	dataDir := t.TempDir()
	args := []string{"--docker-image", image, "--docker-scope", scope}
	p := start(t, options{dataDir: dataDir, args: args})
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "big"}, &created)
	ws := p.waitState(created.Workspace.ID, "running", 90*time.Second)
	const size = 64 << 20
	putBigFile(t, ws.BoxID, size)
	rec := p.exportVerified(ws.ID)

	s := p.dial(-1)
	s.next(10 * time.Second)
	var restored struct{ Workspace workspace }
	p.must(202, "POST", "/v1/exports/"+rec.ID+"/restore", nil, &restored)
	nid := restored.Workspace.ID
	s.waitProgress("upload progress", nid, time.Minute, func(pr string) bool { return strings.HasPrefix(pr, "restore: uploading") })
	p.kill()

	p = start(t, options{dataDir: dataDir, args: args})
	nws := p.waitState(nid, "running", 3*time.Minute)
	// Where the kill landed is not fixed; say which path the restart took.
	switch log := p.stderr.String(); {
	case strings.Contains(log, "never started; making it again"):
		t.Log("the kill left an unstarted container: the restart made it again")
	case strings.Contains(log, "restored box already existed"):
		t.Log("the kill came after the start: the restart kept the box")
	default:
		t.Log("the kill came before the container was created")
	}
	if !strings.HasSuffix(nws.Name, "(restored)") {
		t.Errorf("restored workspace is named %q", nws.Name)
	}
	st, err := dockerCLI(t).ContainerStatPath(context.Background(), nws.BoxID, client.ContainerStatPathOptions{Path: "/workspace/big.bin"})
	if err != nil || st.Stat.Size != size {
		t.Fatalf("restored big.bin: %+v, %v; want %d bytes", st, err, size)
	}
	res, err := dockerCLI(t).ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "companion.workspace="+nid)})
	if err != nil || len(res.Items) != 1 || res.Items[0].ID != nws.BoxID {
		t.Fatalf("containers of the restored workspace: %+v, %v", res.Items, err)
	}
}
