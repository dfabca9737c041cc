package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/exportrun"
	"github.com/canvasapp/companion/exports"
	"github.com/canvasapp/companion/restorerun"
)

// These drive companion's exporter and file restorer (exportrun,
// restorerun) against this emulator with a box of its own
// (EMULATOR_FS_ROOT): what one box's /workspace held is exported, and
// restored into another box's.

// boxEnv is an emulator whose "/" is a directory of the test's.
type boxEnv struct {
	*env
	root string
}

func newBox(t *testing.T, cfg Config) *boxEnv {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.FSRoot = root
	cfg.Now = time.Now // ReadyDelay runs on the wall clock
	return &boxEnv{env: newEnv(t, cfg), root: root}
}

func (b *boxEnv) ws() string { return filepath.Join(b.root, "workspace") }

// exportBox exports box's /workspace through handler h (the box's own
// server when nil) and returns the verified result.
func exportBox(t *testing.T, box *boxEnv, h http.Handler) (core.ExportResult, error) {
	t.Helper()
	url := box.srv.URL
	if h != nil {
		ts := httptest.NewServer(h)
		t.Cleanup(ts.Close)
		url = ts.URL
	}
	x := &exportrun.Exporter{Writer: &exports.Writer{Root: t.TempDir()}}
	return x.Export(context.Background(), core.ExportJob{WorkspaceID: "ws-1", BoxID: "box-1", ArchivePath: "/workspace",
		Endpoint: core.BoxEndpoint{URL: url}}, nil)
}

// restoreJob is the job restoring res into the box at url.
func restoreJob(res core.ExportResult, url string) core.FileRestoreJob {
	job := core.FileRestoreJob{Endpoint: core.BoxEndpoint{URL: url}, Root: "/workspace",
		Open: func(name string) (io.ReadCloser, error) { return os.Open(filepath.Join(res.Dir, name)) }}
	for _, f := range res.Files {
		switch {
		case f.Kind == exports.KindArchive && f.Format == "tar.gz":
			job.Archive = f
		case f.Kind == core.ExportKindIndex:
			job.Index = &f
		}
	}
	return job
}

// treeOf reads every regular file below dir with its executable bit (the
// one mode bit a restore brings back).
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			b, _ := os.ReadFile(p)
			fi, _ := d.Info()
			x := "-"
			if fi.Mode()&0o111 != 0 {
				x = "x"
			}
			out[filepath.ToSlash(rel)] = x + " " + string(b)
		}
		return nil
	})
	return out
}

// TestRestoreRunPutsEveryFileBack: a workspace with a repository (so
// the archive is narrowed and re-packed), files beside it, an executable
// and an empty directory is exported from one box and restored into
// another, which then holds the same files with the same executable
// bits; restoring again changes nothing.
func TestRestoreRunPutsEveryFileBack(t *testing.T) {
	src := newBox(t, Config{})
	newRepoAt(t, filepath.Join(src.ws(), "repo"))
	writeFile(t, filepath.Join(src.ws(), "notes.txt"), "notes\n")
	writeFile(t, filepath.Join(src.ws(), "data", "blob.bin"), strings.Repeat("\x00\xff", 3<<20))
	writeFile(t, filepath.Join(src.ws(), "bin", "run.sh"), "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(src.ws(), "bin", "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(src.ws(), "empty"), 0o755)
	res, err := exportBox(t, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := newBox(t, Config{ReadyDelay: 300 * time.Millisecond})
	var lines []string
	rr := &restorerun.Restorer{}
	out, err := rr.RestoreFiles(context.Background(), restoreJob(res, dst.srv.URL), func(l string) { lines = append(lines, l) })
	if err != nil {
		t.Fatal(err)
	}
	want, got := treeOf(t, src.ws()), treeOf(t, dst.ws())
	for p, v := range want {
		if strings.HasPrefix(p, "repo/.git/") && (strings.HasSuffix(p, "/config") || strings.Contains(p, "/logs/")) {
			continue // never archived
		}
		if got[p] != v {
			t.Errorf("%s: restored as %.20q, want %.20q", p, got[p], v)
		}
	}
	if fi, err := os.Stat(filepath.Join(dst.ws(), "empty")); err != nil || !fi.IsDir() {
		t.Errorf("the empty directory was not made: %v", err)
	}
	if out.Files == 0 || len(out.Notes) != 0 || len(lines) == 0 || !strings.Contains(lines[0], "waiting") {
		t.Errorf("result %+v, progress %q", out, lines)
	}
	if _, err := rr.RestoreFiles(context.Background(), restoreJob(res, dst.srv.URL), nil); err != nil {
		t.Fatalf("restoring twice: %v", err)
	}
}

// TestRestoreRunRefusesADamagedExport: an index that lists another hash
// than the archive holds, and a box that reads back other bytes than it
// was sent, are errors; a box without chmod keeps the files and the
// result says their executable bit is missing.
func TestRestoreRunRefusesADamagedExport(t *testing.T) {
	src := newBox(t, Config{})
	writeFile(t, filepath.Join(src.ws(), "a.txt"), "aaaa\n")
	writeFile(t, filepath.Join(src.ws(), "x.sh"), "#!/bin/sh\n")
	os.Chmod(filepath.Join(src.ws(), "x.sh"), 0o755)
	res, err := exportBox(t, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	rr := &restorerun.Restorer{}

	// The index's hash of a.txt changed after the export.
	job := restoreJob(res, newBox(t, Config{}).srv.URL)
	ix, err := os.ReadFile(filepath.Join(res.Dir, job.Index.Name))
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "index")
	os.WriteFile(bad, bytes.Replace(ix, []byte(`"sha256":"`), []byte(`"sha256":"0`), 1), 0o600)
	open := job.Open
	job.Open = func(name string) (io.ReadCloser, error) {
		if name == job.Index.Name {
			return os.Open(bad)
		}
		return open(name)
	}
	if _, err := rr.RestoreFiles(context.Background(), job, nil); !core.IsKind(err, core.KindConflict) {
		t.Errorf("a damaged index: %v, want a conflict", err)
	}

	// A box whose downloads answer other bytes.
	dst := newBox(t, Config{})
	liar := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/file/download" {
			rec := httptest.NewRecorder()
			dst.srv.Config.Handler.ServeHTTP(rec, r)
			body := bytes.ToUpper(rec.Body.Bytes())
			w.Header().Set("Content-Length", rec.Header().Get("Content-Length"))
			w.WriteHeader(rec.Code)
			w.Write(body)
			return
		}
		dst.srv.Config.Handler.ServeHTTP(w, r)
	})
	ls := httptest.NewServer(liar)
	t.Cleanup(ls.Close)
	if _, err := rr.RestoreFiles(context.Background(), restoreJob(res, ls.URL), nil); err == nil || !strings.Contains(err.Error(), "reads back") {
		t.Errorf("a box that reads back other bytes: %v", err)
	}

	// A box without a shell to chmod with.
	dst = newBox(t, Config{})
	ns := httptest.NewServer(withoutShell(dst.srv.Config.Handler))
	t.Cleanup(ns.Close)
	out, err := rr.RestoreFiles(context.Background(), restoreJob(res, ns.URL), nil)
	if err != nil || len(out.Notes) != 1 || !strings.Contains(out.Notes[0], "without their executable bit") {
		t.Errorf("no chmod: %+v %v", out, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst.ws(), "x.sh")); string(b) != "#!/bin/sh\n" {
		t.Errorf("x.sh not restored: %q", b)
	}
}

// TestExportRunNarrowedWithoutAShellBlocks: when the archive is narrowed
// to a repository and the box cannot list the rest (its bash route is
// refused), the export fails naming the repository archived and the
// directories that would be lost, and nothing is kept.
func TestExportRunNarrowedWithoutAShellBlocks(t *testing.T) {
	src := newBox(t, Config{})
	newRepoAt(t, filepath.Join(src.ws(), "repo"))
	writeFile(t, filepath.Join(src.ws(), "notes.txt"), "notes\n")
	writeFile(t, filepath.Join(src.ws(), "data", "blob.bin"), "blob")
	_, err := exportBox(t, src, withoutShell(src.srv.Config.Handler))
	if err == nil || !strings.Contains(err.Error(), "archived only the repository /workspace/repo") ||
		!strings.Contains(err.Error(), "data/") || !strings.Contains(err.Error(), "would be lost") {
		t.Fatalf("export without a shell: %v", err)
	}
}

// withoutShell is next as a box without the bash routes would answer:
// 404, as FastAPI answers a route it does not have.
func withoutShell(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/bash/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"detail":"Not Found"}`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// newRepoAt makes dir a git repository with a commit and uncommitted
// work.
func newRepoAt(t *testing.T, dir string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "main.go"), "package main\n")
	gitT(t, dir, "init", "-q", "-b", "main")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-q", "-m", "base")
	writeFile(t, filepath.Join(dir, "main.go"), "package main\n\n// uncommitted\n")
}
