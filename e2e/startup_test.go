package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
)

// seedWorkspaces writes n paused Docker workspaces (without boxes, so the
// reconciler leaves them alone) straight into a data dir's database, as a
// store that has grown for a year would hold them. It returns the revision
// the store is at.
func seedWorkspaces(t *testing.T, dataDir string, n int) int64 {
	t.Helper()
	ctx := context.Background()
	store, err := db.Open(ctx, filepath.Join(dataDir, "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const batch = 10000
	for i := 0; i < n; i += batch {
		list := make([]core.Workspace, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			list = append(list, core.Workspace{
				ID: fmt.Sprintf("ws_seed%06d", j), Name: fmt.Sprintf("seed %d", j), AccountID: "local-docker", Provider: "docker",
				State: core.StatePaused, PausedAt: at, CreatedAt: at,
			})
		}
		if err := store.SaveWorkspaces(ctx, list); err != nil {
			t.Fatal(err)
		}
	}
	_, rev, _, err := store.Changes(ctx, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// TestReadyBeforeLoadingLargeStore: with 100,000 workspaces in the store,
// companion prints its ready line before it loads them (its log says so in
// that order), and a client that connects the moment the ready line
// arrives still gets a snapshot with every one of them at the store's
// revision.
func TestReadyBeforeLoadingLargeStore(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 100,000 workspaces")
	}
	const n = 100000
	dir := t.TempDir()
	rev := seedWorkspaces(t, dir, n)

	p := start(t, options{dataDir: dir, args: []string{"--docker-scope", dockerScope(t)}})
	s := p.dial(-1)
	snap := s.next(2 * time.Minute)
	if snap.Type != "snapshot" {
		t.Fatalf("first message is %q, want snapshot", snap.Type)
	}
	if len(snap.Workspaces) != n || snap.Rev != rev {
		t.Fatalf("snapshot has %d workspaces at rev %d, want %d at rev %d", len(snap.Workspaces), snap.Rev, n, rev)
	}
	seen := make(map[string]bool, n)
	for _, ws := range snap.Workspaces {
		seen[ws.ID] = true
	}
	for _, id := range []string{"ws_seed000000", "ws_seed050000", fmt.Sprintf("ws_seed%06d", n-1)} {
		if !seen[id] {
			t.Errorf("snapshot lacks %s", id)
		}
	}
	if len(seen) != n {
		t.Errorf("snapshot has %d distinct ids, want %d", len(seen), n)
	}

	logs := p.stderr.String()
	readyAt := strings.Index(logs, `"msg":"companion ready"`)
	loadedAt := strings.Index(logs, `"msg":"workspaces loaded"`)
	if readyAt < 0 || loadedAt < 0 || loadedAt < readyAt {
		t.Fatalf("want the ready log before the workspaces loaded log (at %d and %d)", readyAt, loadedAt)
	}
	if !strings.Contains(logs[loadedAt:], fmt.Sprintf(`"workspaces":%d`, n)) {
		t.Errorf("the loaded line does not count %d workspaces:\n%s", n, logs[loadedAt:min(len(logs), loadedAt+300)])
	}
	p.stop()
}

// TestBadAllowHostStopsBeforeReady: the API is built after the ready line,
// but its settings are checked before it: a --allow-host that cannot be a
// host stops companion with the reason and no ready line.
func TestBadAllowHostStopsBeforeReady(t *testing.T) {
	cmd := exec.Command(companionBin, "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--docker-scope", "unused", "--allow-host", "a/b:80")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil || stdout.Len() != 0 || !strings.Contains(stderr.String(), `allowed host \"a/b:80\"`) {
		t.Fatalf("exit %v, stdout %q, stderr:\n%s", err, stdout.String(), stderr.String())
	}
}
