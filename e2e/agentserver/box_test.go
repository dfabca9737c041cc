package main

import (
	"archive/tar"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/agentclient"
	"github.com/canvasapp/companion/e2e/boximage"
	"github.com/canvasapp/companion/exports"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/moby/moby/client"
)

// TestClientAgainstBoxImage runs the real box image (the emulator FROM
// scratch, no git inside) in Docker, copies a real repository into its
// workspace through the Engine API, and exports it with the client into a
// verified export.
func TestClientAgainstBoxImage(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the Docker Engine; skipped with -short")
	}
	r := newRepo(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		t.Fatalf("this test needs a reachable Docker Engine (run with -short to skip): %v", err)
	}
	img, err := boximage.Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	scope := "agentclient-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() {
		if err := boximage.Cleanup(context.Background(), "companion.scope", scope); err != nil {
			t.Error(err)
		}
	})
	id, url, err := boximage.RunTestBox(ctx, cli, img, scope, []string{"OH_SESSION_API_KEYS_0=" + testKey, "EMULATOR_SEED_REPO=/workspace/seeded"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := agentclient.New(agentclient.Endpoint{URL: url, SessionKey: testKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	testsupport.Poll(t, 30*time.Second, func() error { _, err := c.ServerInfo(ctx); return err })

	// The repository goes in as a tar through the Engine API: the image
	// has no shell and no git.
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarDir(pw, r.dir, "project")) }()
	if _, err := cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: "/workspace", Content: pr}); err != nil {
		t.Fatal(err)
	}

	ex, err := (&exports.Writer{Root: t.TempDir()}).Begin("ws-box", id[:12])
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Archive(ctx, agentclient.ArchiveRequest{Path: "/workspace/project", Format: agentclient.FormatTarGz})
	if err != nil {
		t.Fatal(err)
	}
	if a.Meta.Branch != r.branch || a.Meta.HeadCommit != r.head || a.Meta.RepoRemote != r.remote || a.Meta.RepoRoot != "/workspace/project" {
		t.Errorf("meta from the box: %+v", a.Meta)
	}
	_, err = ex.Add(exports.File{Name: a.Filename, Kind: exports.KindArchive, Format: a.Format, Branch: a.Meta.Branch}, a.Body)
	a.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	m, dir, err := ex.Commit()
	if err != nil || !m.Verified {
		t.Fatalf("commit: %+v %v", m, err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "project.tar.gz"))
	files := untar(t, raw)
	if files["project/notes.txt"] != "untracked\n" || files["project/README.md"] != "hello\nworld\n" {
		t.Errorf("exported capture from the box lacks the uncommitted work (%d files)", len(files))
	}
	// git-delta without a git binary in the box: the emulator's pure-Go
	// implementation, against the merge-base with origin.
	d, err := c.Archive(ctx, agentclient.ArchiveRequest{Path: "/workspace/project", Format: agentclient.FormatGitDelta, DefaultExcludes: true})
	if err != nil {
		t.Fatal(err)
	}
	patch, err := io.ReadAll(d.Body)
	d.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if d.Meta.BaseCommit != r.base || d.Meta.BaseRef != "auto" || !strings.Contains(string(patch), "diff --git a/notes.txt b/notes.txt") ||
		strings.Contains(string(patch), "debug.log") {
		t.Errorf("git-delta from the box: %+v\n%.400s", d.Meta, patch)
	}

	// The repository the emulator seeded itself, without git, exports too.
	d, err = c.Archive(ctx, agentclient.ArchiveRequest{Path: "/workspace/seeded", Format: agentclient.FormatGitDelta, DefaultExcludes: true})
	if err != nil {
		t.Fatal(err)
	}
	patch, err = io.ReadAll(d.Body)
	d.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Meta.BaseCommit) != 40 || d.Meta.BaseCommit != d.Meta.HeadCommit || d.Meta.Branch != "main" ||
		d.Meta.RepoRemote != "https://example.invalid/canvas/demo.git" || !strings.Contains(string(patch), "diff --git a/notes.md b/notes.md") {
		t.Errorf("git-delta of the seeded repository: %+v\n%.400s", d.Meta, patch)
	}
}

// tarDir writes dir's regular files and directories as a tar under prefix/.
func tarDir(w io.Writer, dir, prefix string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil || !(d.IsDir() || d.Type().IsRegular()) {
			return err
		}
		hdr, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(filepath.Join(prefix, rel))
		if d.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
