package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/canvasapp/companion/agentclient"
	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/exportrun"
	"github.com/canvasapp/companion/exports"
)

// These drive companion's exporter (exportrun, core.Exporter) against this
// emulator over real HTTP into a real export directory.

func fileSum(t *testing.T, p string) (int64, string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return int64(len(b)), hex.EncodeToString(s[:])
}

// TestExportRunThroughProxy: every conversation's trajectory, the tar.gz
// and the git-delta archive, through a proxy that wants its own header;
// what is on disk is what the result says, and progress counted up to the
// total.
func TestExportRunThroughProxy(t *testing.T) {
	r := newRepo(t)
	e := newEnv(t, Config{Keys: []string{testKey}})
	ids := map[string]bool{}
	for range 3 {
		ids[e.create(map[string]any{}).ID] = true
	}
	proxy := previewProxy(t, e.srv.Config.Handler, "pv-token")
	root := t.TempDir()
	x := &exportrun.Exporter{Writer: &exports.Writer{Root: root}}
	var steps []core.ExportProgress
	res, err := x.Export(context.Background(), core.ExportJob{WorkspaceID: "ws-1", BoxID: "box-1", GitDelta: true, ArchivePath: r.dir,
		Endpoint: core.BoxEndpoint{URL: proxy.URL, SessionKey: testKey, Headers: http.Header{"X-Daytona-Preview-Token": {"pv-token"}}}},
		func(p core.ExportProgress) { steps = append(steps, p) })
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	var total int64
	for _, f := range res.Files {
		kinds[f.Kind]++
		n, sum := fileSum(t, filepath.Join(res.Dir, f.Name))
		if n != f.Bytes || sum != f.SHA256 {
			t.Errorf("%s on disk: %d bytes %s; result says %d %s", f.Name, n, sum, f.Bytes, f.SHA256)
		}
		if f.Kind == exports.KindTrajectory && !ids[f.ConversationID] {
			t.Errorf("trajectory of unknown conversation %q", f.ConversationID)
		}
		if f.Kind != "manifest" {
			total += f.Bytes
		}
		if f.Format == agentclient.FormatTarGz && f.SHA256 != res.ArchiveSHA256 {
			t.Errorf("ArchiveSHA256 %s is not the tar.gz's %s", res.ArchiveSHA256, f.SHA256)
		}
	}
	if kinds[exports.KindTrajectory] != 3 || kinds[exports.KindArchive] != 2 || kinds["manifest"] != 1 || res.ArchiveSHA256 == "" {
		t.Fatalf("files %+v", res.Files)
	}
	if total != res.Bytes {
		t.Errorf("result bytes %d, files sum to %d", res.Bytes, total)
	}
	last := steps[len(steps)-1]
	if steps[0].Step != "conversations" || last.Step != "verify" || last.Bytes != res.Bytes {
		t.Errorf("progress %+v; want conversations first and verify with every byte last", steps)
	}
	for i := 1; i < len(steps); i++ {
		if steps[i].Bytes < steps[i-1].Bytes {
			t.Errorf("progress went back: %+v", steps)
		}
	}
	if !filepath.IsAbs(res.Dir) || filepath.Dir(res.Dir) != filepath.Join(root, "ws-1") {
		t.Errorf("export dir %s is not under the root's workspace dir", res.Dir)
	}
}

// TestExportRunCutArchiveLeavesNothing: an archive cut mid-body fails the
// whole export, with a retryable error, and nothing stays on disk.
func TestExportRunCutArchiveLeavesNothing(t *testing.T) {
	r := newRepo(t)
	e := newEnv(t, Config{})
	e.create(map[string]any{})
	cutter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.HasPrefix(req.URL.Path, "/api/file/archive") {
			e.srv.Config.Handler.ServeHTTP(w, req)
			return
		}
		rec := httptest.NewRecorder()
		e.srv.Config.Handler.ServeHTTP(rec, req)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		body := rec.Body.Bytes()
		w.Write(body[:len(body)/2])
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(cutter.Close)
	root := t.TempDir()
	x := &exportrun.Exporter{Writer: &exports.Writer{Root: root}}
	_, err := x.Export(context.Background(), core.ExportJob{WorkspaceID: "ws-1", BoxID: "box-1", ArchivePath: r.dir, Endpoint: core.BoxEndpoint{URL: cutter.URL}}, nil)
	if !errors.Is(err, agentclient.ErrRetryable) || !strings.Contains(err.Error(), exportrun.ArchiveName) {
		t.Fatalf("export of a cut archive: %v; want a retryable error naming the archive", err)
	}
	if left, _ := os.ReadDir(filepath.Join(root, "ws-1")); len(left) != 0 {
		t.Fatalf("a failed export left %d entries", len(left))
	}
}

// TestExportRunNothingToArchive: a path the agent-server has nothing to
// archive in (400) still exports the trajectories, with no archive hash.
func TestExportRunNothingToArchive(t *testing.T) {
	e := newEnv(t, Config{})
	e.create(map[string]any{})
	notDir := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(notDir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	x := &exportrun.Exporter{Writer: &exports.Writer{Root: t.TempDir()}}
	res, err := x.Export(context.Background(), core.ExportJob{WorkspaceID: "ws-1", BoxID: "box-1", ArchivePath: notDir, Endpoint: core.BoxEndpoint{URL: e.srv.URL}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ArchiveSHA256 != "" || len(res.Files) != 2 || res.Files[0].Kind != exports.KindTrajectory {
		t.Fatalf("result %+v; want the trajectory and the manifest only", res)
	}
}
