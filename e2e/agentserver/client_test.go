package main

import (
	"archive/zip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/agentclient"
	"github.com/canvasapp/companion/exports"
)

// These tests drive the real client (agentclient) against this emulator
// over real HTTP, and feed what it streams into the real export writer.

func (e *env) client(t *testing.T, headers http.Header) *agentclient.Client {
	t.Helper()
	c, err := agentclient.New(agentclient.Endpoint{URL: e.srv.URL, Headers: headers, SessionKey: e.key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientServerInfoIdle(t *testing.T) {
	e := newEnv(t, Config{Keys: []string{testKey}, RuntimeIdleTimeout: 600})
	c := e.client(t, nil)
	e.clock.Advance(90 * time.Second)
	si, err := c.ServerInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if si.Idle() != 90*time.Second || si.Title != "OpenHands Agent Server" || si.RuntimeIdleTimeoutSeconds == nil ||
		*si.RuntimeIdleTimeoutSeconds != 600 {
		t.Fatalf("server info %+v", si)
	}
	// The probe is not activity.
	if si2, _ := c.ServerInfo(context.Background()); si2.Idle() != 90*time.Second {
		t.Fatalf("second probe idle %v", si2.Idle())
	}
}

func TestClientPagesAllConversationsAndTrajectories(t *testing.T) {
	e := newEnv(t, Config{Keys: []string{testKey}})
	want := map[string]bool{}
	for range 230 {
		e.clock.Advance(time.Second)
		want[e.create(map[string]any{}).ID] = true
	}
	e.clock.Advance(time.Minute)
	c := e.client(t, nil)
	ctx := context.Background()
	all, err := c.AllConversations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(want) {
		t.Fatalf("got %d conversations, want %d (paging lost or repeated some)", len(all), len(want))
	}
	for i, cv := range all {
		if !want[cv.ID] {
			t.Fatalf("unknown conversation %s", cv.ID)
		}
		if i > 0 && cv.CreatedAt.Before(all[i-1].CreatedAt) {
			t.Fatalf("not oldest first at %d", i)
		}
	}
	for _, cv := range all[:3] {
		d, err := c.DownloadTrajectory(ctx, cv.ID)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(d.Body)
		d.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		zr, err := zip.NewReader(strings.NewReader(string(raw)), int64(len(raw)))
		if err != nil {
			t.Fatalf("trajectory of %s is not a zip: %v", cv.ID, err)
		}
		if d.Filename != cv.HexID()+".zip" || zr.File[0].Name != cv.HexID()+"/" {
			t.Fatalf("trajectory %q, first entry %q", d.Filename, zr.File[0].Name)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(e.dir, "*.zip")); len(left) != 0 {
		t.Errorf("trajectory zips left behind: %v", left)
	}
	if si, _ := c.ServerInfo(ctx); si.Idle() != time.Minute {
		t.Fatalf("search and trajectory reads moved the idle clock: idle %v", si.Idle())
	}
	_, err = c.DownloadTrajectory(ctx, "0123456789abcdef0123456789abcdef")
	if !errors.Is(err, agentclient.ErrUnconfirmed) || !strings.Contains(err.Error(), "Conversation not found") {
		t.Fatalf("unknown conversation: %v", err)
	}
}

func TestClientArchiveErrorClasses(t *testing.T) {
	r := newRepo(t)
	e := newEnv(t, Config{Keys: []string{testKey}})
	c := e.client(t, nil)
	ctx := context.Background()
	plain := t.TempDir()
	_, err := c.Archive(ctx, agentclient.ArchiveRequest{Path: plain, Format: agentclient.FormatGitDelta})
	if !errors.Is(err, agentclient.ErrNothingToArchive) {
		t.Errorf("git-delta of a plain dir: %v, want nothing to archive", err)
	}
	_, err = c.Archive(ctx, agentclient.ArchiveRequest{Path: filepath.Join(r.parent, "gone"), Format: agentclient.FormatTarGz})
	if !errors.Is(err, agentclient.ErrUnconfirmed) || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing dir: %v, want unconfirmed (404)", err)
	}
	bad, _ := agentclient.New(agentclient.Endpoint{URL: e.srv.URL, SessionKey: "not-the-key"}, nil)
	_, err = bad.Archive(ctx, agentclient.ArchiveRequest{Path: r.dir, Format: agentclient.FormatTarGz})
	if !errors.Is(err, agentclient.ErrUnconfirmed) || strings.Contains(err.Error(), "not-the-key") {
		t.Errorf("wrong key: %v, want unconfirmed without the key in the text", err)
	}
	// A server that is gone is a network failure: retryable.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	gc, _ := agentclient.New(agentclient.Endpoint{URL: gone.URL}, nil)
	if _, err := gc.ServerInfo(ctx); !errors.Is(err, agentclient.ErrRetryable) {
		t.Errorf("closed server: %v, want retryable", err)
	}
}

// previewProxy stands in for a provider's port proxy: it wants its own
// token header, strips it, and passes the rest to the agent-server.
func previewProxy(t *testing.T, next http.Handler, token string) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Daytona-Preview-Token") != token {
			http.Error(w, "missing preview token", http.StatusUnauthorized)
			return
		}
		r.Header.Del("X-Daytona-Preview-Token")
		next.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func TestClientExportThroughProxyIsVerified(t *testing.T) {
	r := newRepo(t)
	e := newEnv(t, Config{Keys: []string{testKey}})
	for range 2 {
		e.create(map[string]any{})
	}
	proxy := previewProxy(t, e.srv.Config.Handler, "pv-token")
	c, err := agentclient.New(agentclient.Endpoint{URL: proxy.URL + "/", SessionKey: testKey,
		Headers: http.Header{"X-Daytona-Preview-Token": {"pv-token"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	root := t.TempDir()
	ex, err := (&exports.Writer{Root: root}).Begin("ws-1", "box-1")
	if err != nil {
		t.Fatal(err)
	}
	convs, err := c.AllConversations(ctx)
	if err != nil || len(convs) != 2 {
		t.Fatalf("conversations %v %v", convs, err)
	}
	for _, cv := range convs {
		d, err := c.DownloadTrajectory(ctx, cv.ID)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ex.Add(exports.File{Name: cv.HexID() + ".zip", Kind: exports.KindTrajectory, ConversationID: cv.ID}, d.Body)
		d.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, req := range []agentclient.ArchiveRequest{
		{Path: r.dir, Format: agentclient.FormatTarGz},
		{Path: r.dir, Format: agentclient.FormatGitDelta, DefaultExcludes: true},
	} {
		a, err := c.Archive(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if a.Meta.Branch != r.branch || a.Meta.RepoRemote != r.remote || a.Meta.RepoRoot != r.dir || a.Meta.HeadCommit != r.head {
			t.Fatalf("archive meta not decoded: %+v", a.Meta)
		}
		_, err = ex.Add(exports.File{Name: a.Filename, Kind: exports.KindArchive, Format: a.Format,
			BaseCommit: a.Meta.BaseCommit, BaseRef: a.Meta.BaseRef, HeadCommit: a.Meta.HeadCommit,
			Branch: a.Meta.Branch, Remote: a.Meta.RepoRemote, RepoRoot: a.Meta.RepoRoot}, a.Body)
		a.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	m, dir, err := ex.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if !m.Verified || len(m.Files) != 4 || len(m.ConversationIDs) != 2 || m.BaseCommit != r.base ||
		m.Branch != r.branch || m.Remote != r.remote {
		t.Fatalf("manifest %+v", m)
	}
	if _, err := exports.VerifyDir(dir); err != nil {
		t.Fatal(err)
	}
	// The tar.gz on disk is the full capture: uncommitted and ignored work.
	b, _ := os.ReadFile(filepath.Join(dir, "proj.tar.gz"))
	files := untar(t, b)
	if files["proj/notes.txt"] != "untracked\n" || files["proj/debug.log"] != "ignored\n" {
		t.Fatalf("exported tar.gz lacks uncommitted work: %d files", len(files))
	}
	// Without the proxy's header the request never reaches the box.
	noTok, _ := agentclient.New(agentclient.Endpoint{URL: proxy.URL, SessionKey: testKey}, nil)
	if _, err := noTok.ServerInfo(ctx); err == nil {
		t.Fatal("the proxy let a request without its token through")
	}
}

// TestExportOfCutArchiveIsRetryableAndLeavesNothing: the connection to the
// box drops halfway through an archive. The export fails with the client's
// retryable class (so a delete backs off and retries) and leaves no files.
func TestExportOfCutArchiveIsRetryableAndLeavesNothing(t *testing.T) {
	r := newRepo(t)
	e := newEnv(t, Config{})
	cutter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := httptest.NewRecorder()
		e.srv.Config.Handler.ServeHTTP(rec, req)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		body := rec.Body.Bytes()
		w.Write(body[:len(body)/2])
		panic(http.ErrAbortHandler) // drop the connection mid-body
	}))
	t.Cleanup(cutter.Close)
	c, err := agentclient.New(agentclient.Endpoint{URL: cutter.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	ex, err := (&exports.Writer{Root: root}).Begin("ws-1", "box-1")
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Archive(context.Background(), agentclient.ArchiveRequest{Path: r.dir, Format: agentclient.FormatTarGz})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Body.Close()
	_, err = ex.Add(exports.File{Name: a.Filename, Kind: exports.KindArchive, Format: a.Format}, a.Body)
	if !errors.Is(err, agentclient.ErrRetryable) || !strings.Contains(err.Error(), "proj.tar.gz") {
		t.Fatalf("export of a cut archive: %v, want a retryable error naming the file", err)
	}
	if _, _, err := ex.Commit(); err == nil {
		t.Fatal("Commit after a cut archive succeeded")
	}
	if left, _ := os.ReadDir(filepath.Join(root, "ws-1")); len(left) != 0 {
		t.Fatalf("a failed export left %d entries", len(left))
	}
}
