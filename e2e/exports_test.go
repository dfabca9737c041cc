package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/dockertest"
)

// exportFile and exportRec are the wire forms of an export.
type exportFile struct {
	Name           string  `json:"name"`
	Kind           string  `json:"kind"`
	ConversationID *string `json:"conversation_id"`
	Format         *string `json:"format"`
	Bytes          int64   `json:"bytes"`
	SHA256         string  `json:"sha256"`
	URL            string  `json:"url"`
}

type exportRec struct {
	ID            string       `json:"id"`
	WorkspaceID   string       `json:"workspace_id"`
	State         string       `json:"state"`
	Verified      bool         `json:"verified"`
	Bytes         int64        `json:"bytes"`
	ArchiveSHA256 *string      `json:"archive_sha256"`
	Error         *string      `json:"error"`
	Files         []exportFile `json:"files"`
}

// waitExport polls GET /v1/exports/{id} until it is no longer running.
func (p *proc) waitExport(id string, timeout time.Duration) exportRec {
	p.t.Helper()
	var rec exportRec
	testsupport.Poll(p.t, timeout, func() error {
		var got struct{ Export exportRec }
		p.must(200, "GET", "/v1/exports/"+id, nil, &got)
		rec = got.Export
		if rec.State == "running" {
			return fmt.Errorf("export %s still running", id)
		}
		return nil
	})
	return rec
}

// exportVerified exports workspace id and waits for the export to be
// verified.
func (p *proc) exportVerified(id string) exportRec {
	p.t.Helper()
	var started struct{ Export exportRec }
	p.must(202, "POST", "/v1/workspaces/"+id+"/export", nil, &started)
	rec := p.waitExport(started.Export.ID, 3*time.Minute)
	if !rec.Verified {
		p.t.Fatalf("export of %s is %s: %v", id, rec.State, rec.Error)
	}
	return rec
}

// waitProgress waits for an upsert of workspace id whose progress line
// match accepts.
func (s *stream) waitProgress(what, id string, timeout time.Duration, match func(progress string) bool) {
	s.t.Helper()
	s.waitFor(what, timeout, func(m wsMsg) bool {
		var w struct {
			Workspace struct{ ID, Progress string } `json:"workspace"`
		}
		json.Unmarshal(m.Raw, &w)
		return m.Type == "upsert" && w.Workspace.ID == id && match(w.Workspace.Progress)
	})
}

// get sends an authorised GET with extra headers and returns the answer.
func (p *proc) get(path string, hdr map[string]string) (*http.Response, []byte) {
	p.t.Helper()
	req, err := http.NewRequest("GET", p.ready.URL+path, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.ready.Token)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	return resp, raw
}

// boxKey reads the agent-server key the docker adapter put in the box's
// environment, as only the test (with the Engine at hand) can.
func boxKey(t *testing.T, boxID string) string {
	t.Helper()
	ins, err := dockerCLI(t).ContainerInspect(context.Background(), boxID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ins.Container.Config.Env {
		if v, ok := strings.CutPrefix(e, "OH_SESSION_API_KEYS_0="); ok {
			return v
		}
	}
	t.Fatal("box has no session key in its environment")
	return ""
}

// startConversation makes a conversation in the box through its
// agent-server, so the export has trajectories to capture.
func startConversation(t *testing.T, boxURL, key, title string) string {
	t.Helper()
	body := fmt.Sprintf(`{"agent":{"llm":{"model":"m"}},"title":%q}`, title)
	req, _ := http.NewRequest("POST", boxURL+"/api/conversations", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("start conversation: %d %s", resp.StatusCode, raw)
	}
	var c struct{ ID string }
	if err := json.Unmarshal(raw, &c); err != nil || c.ID == "" {
		t.Fatalf("start conversation answer %s: %v", raw, err)
	}
	return c.ID
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestExportDockerWorkspace: through the binary and real Docker, a running
// workspace with two conversations and a seeded git repository is
// exported; the record is verified and lists the trajectories, the
// tar.gz and the manifest; every download matches the manifest's SHA-256,
// a Range request answers the matching slice, the ETag is the SHA-256 and
// revalidates; progress streamed on the WebSocket; the audit trail holds
// the export with the archive's SHA-256. A paused workspace is refused
// unless wake=true, which resumes it and exports.
func TestExportDockerWorkspace(t *testing.T) {
	image := dockertest.BoxImageEnv(t, map[string]string{"EMULATOR_SEED_REPO": "/workspace/seeded"})
	dataDir := t.TempDir()
	p := start(t, options{dataDir: dataDir, args: []string{"--docker-image", image, "--docker-scope", dockerScope(t)}})
	s := p.dial(-1)
	s.next(10 * time.Second)

	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "exported"}, &created)
	id := created.Workspace.ID
	ws := p.waitState(id, "running", 90*time.Second)
	key := boxKey(t, ws.BoxID)
	var convs []string
	testsupport.Poll(t, 30*time.Second, func() error {
		resp, err := http.Get(ws.BoxURL + "/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("ready: %d", resp.StatusCode)
		}
		return nil
	})
	for _, title := range []string{"first", "second"} {
		convs = append(convs, startConversation(t, ws.BoxURL, key, title))
	}

	var started struct{ Export exportRec }
	p.must(202, "POST", "/v1/workspaces/"+id+"/export", nil, &started)
	if started.Export.State != "running" || started.Export.Verified {
		t.Fatalf("a new export should be running and unverified: %+v", started.Export)
	}
	rec := p.waitExport(started.Export.ID, 2*time.Minute)
	if rec.State != "verified" || !rec.Verified || rec.Error != nil {
		t.Fatalf("export did not verify: %+v\n%s", rec, p.stderr.String())
	}

	// Progress went out on the stream, and was cleared at the end.
	s.waitProgress("export progress", id, 10*time.Second, func(pr string) bool { return strings.HasPrefix(pr, "export: ") })
	s.waitProgress("export progress cleared", id, 10*time.Second, func(pr string) bool { return pr == "" })

	byName := map[string]exportFile{}
	trajectories := map[string]bool{}
	for _, f := range rec.Files {
		byName[f.Name] = f
		if f.Kind == "trajectory" && f.ConversationID != nil {
			trajectories[*f.ConversationID] = true
		}
	}
	for _, c := range convs {
		if !trajectories[c] {
			t.Errorf("conversation %s has no trajectory in the export: %+v", c, rec.Files)
		}
	}
	arch, ok := byName["workspace.tar.gz"]
	if !ok || rec.ArchiveSHA256 == nil || *rec.ArchiveSHA256 != arch.SHA256 {
		t.Fatalf("export lacks the tar.gz archive or its SHA-256: %+v", rec)
	}
	if _, ok := byName["manifest.json"]; !ok {
		t.Fatalf("export lacks its manifest: %+v", rec.Files)
	}

	// The manifest, as downloaded, names every other file with its hash.
	resp, raw := p.get(byName["manifest.json"].URL, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("manifest download: %d %s", resp.StatusCode, raw)
	}
	var man struct {
		WorkspaceID string `json:"workspace_id"`
		Verified    bool   `json:"verified"`
		Branch      string `json:"branch"`
		Files       []struct {
			Name   string `json:"name"`
			Bytes  int64  `json:"bytes"`
			SHA256 string `json:"sha256"`
		} `json:"files"`
	}
	if err := json.Unmarshal(raw, &man); err != nil || !man.Verified || man.WorkspaceID != id {
		t.Fatalf("manifest %s: %v", raw, err)
	}
	if len(man.Files) != len(rec.Files)-1 {
		t.Errorf("manifest lists %d files, the record %d besides the manifest", len(man.Files), len(rec.Files)-1)
	}
	for _, mf := range man.Files {
		f, ok := byName[mf.Name]
		if !ok || f.SHA256 != mf.SHA256 || f.Bytes != mf.Bytes {
			t.Errorf("record's %s = %+v, manifest says %+v", mf.Name, f, mf)
		}
		resp, body := p.get(f.URL, nil)
		if resp.StatusCode != 200 || sum(body) != mf.SHA256 || int64(len(body)) != mf.Bytes {
			t.Errorf("download %s: status %d, %d bytes sha256 %s; manifest %d bytes %s", mf.Name, resp.StatusCode, len(body), sum(body), mf.Bytes, mf.SHA256)
		}
		if got := resp.Header.Get("ETag"); got != `"`+mf.SHA256+`"` {
			t.Errorf("ETag of %s = %q, want its SHA-256", mf.Name, got)
		}
	}

	// Range: the archive fetched in two parts is the archive.
	full := arch.Bytes
	half := full / 2
	r1, p1 := p.get(arch.URL, map[string]string{"Range": fmt.Sprintf("bytes=0-%d", half-1)})
	r2, p2 := p.get(arch.URL, map[string]string{"Range": fmt.Sprintf("bytes=%d-", half)})
	if r1.StatusCode != 206 || r2.StatusCode != 206 {
		t.Fatalf("range requests answered %d and %d, want 206", r1.StatusCode, r2.StatusCode)
	}
	whole := append(p1, p2...)
	if sum(whole) != arch.SHA256 {
		t.Errorf("archive reassembled from ranges has sha256 %s, manifest %s", sum(whole), arch.SHA256)
	}
	if r, _ := p.get(arch.URL, map[string]string{"If-None-Match": `"` + arch.SHA256 + `"`}); r.StatusCode != 304 {
		t.Errorf("revalidation with the ETag answered %d, want 304", r.StatusCode)
	}
	if !tarHas(t, whole, "seeded/README.md") {
		t.Error("the archive lacks the box's seeded repository")
	}

	// It is listed, and audited with the archive's hash.
	var list struct{ Exports []exportRec }
	p.must(200, "GET", "/v1/workspaces/"+id+"/exports", nil, &list)
	if len(list.Exports) != 1 || list.Exports[0].ID != rec.ID {
		t.Errorf("exports of the workspace: %+v", list.Exports)
	}
	var audit struct {
		Entries []struct {
			Action, Outcome, WorkspaceID string
			ExportSHA256                 *string `json:"export_sha256"`
		}
	}
	// The outcome is audited just after the record is written.
	testsupport.Poll(t, 30*time.Second, func() error {
		p.must(200, "GET", "/v1/audit", nil, &audit)
		for _, e := range audit.Entries {
			if e.Action == "export" && e.Outcome == "ok" && e.ExportSHA256 != nil && *e.ExportSHA256 == arch.SHA256 {
				return nil
			}
		}
		return fmt.Errorf("no audit entry for the export with the archive's SHA-256: %+v", audit.Entries)
	})
	p.must(404, "GET", "/v1/exports/exp_doesnotexist", nil, nil)
	p.must(404, "GET", "/v1/exports/"+rec.ID+"/files/nothere.zip", nil, nil)

	// A paused box is not woken unless asked.
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	p.waitState(id, "paused", 60*time.Second)
	code, raw := p.call("POST", "/v1/workspaces/"+id+"/export", nil, nil)
	if code != 409 || !strings.Contains(string(raw), "wake=true") {
		t.Fatalf("export of a paused workspace: %d %s, want 409 naming wake=true", code, raw)
	}
	if got := p.stopState(id).State; got != "paused" {
		t.Fatalf("a refused export changed the workspace to %s", got)
	}
	p.must(202, "POST", "/v1/workspaces/"+id+"/export?wake=true&git_delta=true", nil, &started)
	rec2 := p.waitExport(started.Export.ID, 2*time.Minute)
	if !rec2.Verified {
		t.Fatalf("export with wake=true: %+v", rec2)
	}
	// The compact capture came along, with its repository facts in the manifest.
	delta := false
	for _, f := range rec2.Files {
		if f.Name == "workspace.git-delta" && f.Format != nil && *f.Format == "git-delta" && f.Bytes > 0 {
			delta = true
		}
	}
	if !delta {
		t.Errorf("export with git_delta=true lacks the git-delta archive: %+v", rec2.Files)
	}
	if c, _ := p.call("POST", "/v1/workspaces/"+id+"/export?wake=maybe", nil, nil); c != 400 {
		t.Errorf("wake=maybe answered %d, want 400", c)
	}
	if got := p.stopState(id).State; got != "running" {
		t.Errorf("after an export with wake=true the workspace is %s, want running", got)
	}
	p.must(200, "GET", "/v1/workspaces/"+id+"/exports", nil, &list)
	if len(list.Exports) != 2 || list.Exports[0].ID != rec2.ID {
		t.Errorf("two exports, newest first, expected: %+v", list.Exports)
	}
	// On disk: exactly the two verified export directories, no staging.
	dirs, _ := filepath.Glob(filepath.Join(dataDir, "exports", id, "*"))
	hidden, _ := filepath.Glob(filepath.Join(dataDir, "exports", id, ".*"))
	if len(dirs) != 2 || len(hidden) != 0 {
		t.Errorf("export dir holds %v and %v", dirs, hidden)
	}
}

func tarHas(t *testing.T, tgz []byte, name string) bool {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(h.Name, "./") == name || strings.HasSuffix(h.Name, "/"+name) {
			return true
		}
	}
}

// TestExportLocationErrors: an --export-dir that does not exist, or is a
// file, makes the export fail with an error naming the location; the
// record is failed, never verified, and nothing is left on disk. After a
// restart every record is still unverified.
func TestExportLocationErrors(t *testing.T) {
	image := boxImage(t)
	scope := dockerScope(t)
	base := t.TempDir()
	notFile := filepath.Join(base, "a-file")
	if err := os.WriteFile(notFile, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ dir, want string }{
		{filepath.Join(base, "missing"), "does not exist"},
		{notFile, "not writable"},
	}
	dataDir := t.TempDir()
	for _, c := range cases {
		p := start(t, options{dataDir: dataDir, args: []string{"--docker-image", image, "--docker-scope", scope, "--export-dir", c.dir}})
		var list struct{ Workspaces []workspace }
		p.must(200, "GET", "/v1/workspaces", nil, &list)
		var id string
		if len(list.Workspaces) > 0 {
			id = list.Workspaces[0].ID
		} else {
			var created struct{ Workspace workspace }
			p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "noexport"}, &created)
			id = created.Workspace.ID
		}
		p.waitState(id, "running", 90*time.Second)
		var started struct{ Export exportRec }
		p.must(202, "POST", "/v1/workspaces/"+id+"/export", nil, &started)
		rec := p.waitExport(started.Export.ID, time.Minute)
		if rec.State != "failed" || rec.Verified || rec.Error == nil || !strings.Contains(*rec.Error, c.want) || !strings.Contains(*rec.Error, c.dir) {
			t.Errorf("export to %s: %+v; want failed naming the location and %q", c.dir, rec, c.want)
		}
		code, _ := p.call("GET", "/v1/exports/"+rec.ID+"/files/manifest.json", nil, nil)
		if code != 409 {
			t.Errorf("download from a failed export answered %d, want 409", code)
		}
		p.stop()
	}
	if _, err := os.Stat(filepath.Join(base, "missing")); !os.IsNotExist(err) {
		t.Errorf("a missing export dir was created: %v", err)
	}
	p := start(t, options{dataDir: dataDir, args: []string{"--docker-image", image, "--docker-scope", scope}})
	var list struct{ Workspaces []workspace }
	p.must(200, "GET", "/v1/workspaces", nil, &list)
	var ex struct{ Exports []exportRec }
	p.must(200, "GET", "/v1/workspaces/"+list.Workspaces[0].ID+"/exports", nil, &ex)
	if len(ex.Exports) != len(cases) {
		t.Errorf("%d export records, want %d", len(ex.Exports), len(cases))
	}
	for _, e := range ex.Exports {
		if e.Verified || e.State != "failed" {
			t.Errorf("record %+v should be failed", e)
		}
	}
}

// TestExportDirNotMounted: an --export-dir that held companion's exports
// and is then an empty directory (its disk not mounted) refuses the next
// export with a reason saying so, and nothing is written into it; with
// the disk back, exports verify again.
func TestExportDirNotMounted(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	base, dataDir := t.TempDir(), t.TempDir()
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	args := []string{"--docker-image", image, "--docker-scope", scope, "--export-dir", mnt}
	p := start(t, options{dataDir: dataDir, args: args})
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "mounted"}, &created)
	id := created.Workspace.ID
	p.waitState(id, "running", 90*time.Second)
	export := func() exportRec {
		var started struct{ Export exportRec }
		p.must(202, "POST", "/v1/workspaces/"+id+"/export", nil, &started)
		return p.waitExport(started.Export.ID, 2*time.Minute)
	}
	if rec := export(); !rec.Verified {
		t.Fatalf("first export: %+v", rec)
	}

	// The disk goes away: its mount point is an empty directory.
	if err := os.Rename(mnt, filepath.Join(base, "disk")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	rec := export()
	if rec.State != "failed" || rec.Error == nil || !strings.Contains(*rec.Error, "not mounted") || !strings.Contains(*rec.Error, mnt) {
		t.Errorf("export into the empty mount point: %+v; want failed, saying not mounted", rec)
	}
	if ents, _ := os.ReadDir(mnt); len(ents) != 0 {
		t.Errorf("the empty mount point was written to: %v", ents)
	}

	// The disk is back.
	if err := os.Remove(mnt); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(base, "disk"), mnt); err != nil {
		t.Fatal(err)
	}
	if rec := export(); !rec.Verified {
		t.Errorf("export with the disk back: %+v", rec)
	}
}

// putBigFile copies size bytes of incompressible data into the box at
// /workspace/big.bin through the Engine API, so that archiving it takes a
// while.
func putBigFile(t *testing.T, boxID string, size int64) {
	t.Helper()
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		if err := tw.WriteHeader(&tar.Header{Name: "big.bin", Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
			pw.CloseWithError(err)
			return
		}
		if _, err := io.CopyN(tw, rand.NewChaCha8([32]byte{1}), size); err != nil {
			pw.CloseWithError(err)
			return
		}
		pw.CloseWithError(tw.Close())
	}()
	if _, err := dockerCLI(t).CopyToContainer(context.Background(), boxID, client.CopyToContainerOptions{DestinationPath: "/workspace", Content: pr}); err != nil {
		t.Fatal(err)
	}
}

// TestExportKilledMidway: companion is killed (SIGKILL) while an export is
// staged; after a restart its staging directory is gone, its record is
// failed and not verified, and a new export of the same workspace verifies.
func TestExportKilledMidway(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	dataDir := t.TempDir()
	args := []string{"--docker-image", image, "--docker-scope", scope}
	p := start(t, options{dataDir: dataDir, args: args})
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "killed"}, &created)
	id := created.Workspace.ID
	ws := p.waitState(id, "running", 90*time.Second)
	putBigFile(t, ws.BoxID, 96<<20)

	var started struct{ Export exportRec }
	p.must(202, "POST", "/v1/workspaces/"+id+"/export", nil, &started)
	staging := filepath.Join(dataDir, "exports", id, ".*.partial")
	testsupport.Poll(t, time.Minute, func() error {
		if m, _ := filepath.Glob(staging); len(m) == 0 {
			return fmt.Errorf("no staging directory yet")
		}
		return nil
	})
	p.kill()
	var rec struct{ Export exportRec }
	if m, _ := filepath.Glob(staging); len(m) != 1 {
		t.Fatalf("after the kill, staging directories: %v", m)
	}

	p = start(t, options{dataDir: dataDir, args: args})
	p.must(200, "GET", "/v1/exports/"+started.Export.ID, nil, &rec)
	if rec.Export.State != "failed" || rec.Export.Verified || rec.Export.Error == nil || len(rec.Export.Files) != 0 {
		t.Fatalf("after restart the interrupted export is %+v; want failed, unverified, no files", rec.Export)
	}
	if m, _ := filepath.Glob(staging); len(m) != 0 {
		t.Errorf("staging directories survived the restart: %v", m)
	}
	if done, _ := filepath.Glob(filepath.Join(dataDir, "exports", id, "2*")); len(done) != 0 {
		t.Errorf("an interrupted export left a final directory: %v", done)
	}
	p.must(202, "POST", "/v1/workspaces/"+id+"/export", nil, &started)
	again := p.waitExport(started.Export.ID, 3*time.Minute)
	if !again.Verified {
		t.Fatalf("export after the restart: %+v", again)
	}
	var big *exportFile
	for i := range again.Files {
		if again.Files[i].Name == "workspace.tar.gz" {
			big = &again.Files[i]
		}
	}
	if big == nil || big.Bytes < 96<<20 {
		t.Errorf("the archive should hold the 96 MiB file: %+v", again.Files)
	}
}
