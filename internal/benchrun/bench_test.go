package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildFor builds one of the bench's commands for a test.
func buildFor(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/canvasapp/companion/"+pkg).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// The client process against the bare hub: every client reads the whole
// snapshot the hub was given, and every broadcast reaches every client.
func TestClientAgainstBareHub(t *testing.T) {
	hubBin, clientBin := buildFor(t, "internal/benchrun/barehub"), buildFor(t, "internal/benchrun/wsclient")
	list := `{"rev":7,"server_time":"2026-01-01T00:00:00Z","workspaces":[{"id":"ws_a","rev":6},{"id":"ws_b","rev":7}]}`
	file := filepath.Join(t.TempDir(), "list.json")
	if err := os.WriteFile(file, []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}
	hub, err := startServer(hubBin, file)
	if err != nil {
		t.Fatal(err)
	}
	defer hub.stop()
	r, err := runClient(clientBin, hub, "-bare", "-n", "30", "-inflight", "5", "-rounds", "5")
	if err != nil {
		t.Fatal(err)
	}
	want := len(`{"type":"snapshot","rev":7,"server_time":"2026-01-01T00:00:00Z","workspaces":[{"id":"ws_a","rev":6},{"id":"ws_b","rev":7}]}`)
	if r.SnapshotBytes != want {
		t.Errorf("snapshot_bytes = %d, want %d", r.SnapshotBytes, want)
	}
	if r.StormMS <= 0 || r.FanoutP50MS <= 0 || r.FanoutP99MS < r.FanoutP50MS || r.CPUPerBroadcast < 0 {
		t.Errorf("implausible figures: %+v", r)
	}
	// Asked for the table form, the client refuses an object snapshot.
	if _, err := runClient(clientBin, hub, "-bare", "-table", "-n", "3", "-rounds", "0"); err == nil || !strings.Contains(err.Error(), "object form") {
		t.Errorf("-table against the bare hub: %v, want a refusal of the object form", err)
	}
}

// The client process against the real binary on a seeded store: the
// snapshot carries the seeded workspaces and the keep toggles reach every
// client as upserts.
func TestClientAgainstCompanion(t *testing.T) {
	compBin, clientBin := buildFor(t, "cmd/companion"), buildFor(t, "internal/benchrun/wsclient")
	dir := t.TempDir()
	if err := seedDataDir(dir, 25); err != nil {
		t.Fatal(err)
	}
	s, err := startServer(compBin, desktopArgs(dir)...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	raw, err := s.get("/v1/workspaces")
	if err != nil {
		t.Fatal(err)
	}
	id, err := saveList(raw, filepath.Join(t.TempDir(), "list.json"))
	if err != nil {
		t.Fatal(err)
	}
	var l struct{ Workspaces []json.RawMessage }
	if err := json.Unmarshal(raw, &l); err != nil || len(l.Workspaces) != 25 || !strings.HasPrefix(id, "ws_bench") {
		t.Fatalf("GET /v1/workspaces: %d workspaces, first %q, %v", len(l.Workspaces), id, err)
	}
	r, err := runClient(clientBin, s, "-workspace", id, "-n", "20", "-inflight", "5", "-rounds", "4")
	if err != nil {
		t.Fatal(err)
	}
	if r.SnapshotBytes < len(raw)/2 || r.FanoutP50MS <= 0 || r.FanoutP99MS < r.FanoutP50MS {
		t.Errorf("implausible figures (list answer %d bytes): %+v", len(raw), r)
	}
	// The table form, as the benchmark asks for it: the same 25
	// workspaces in fewer bytes.
	tr, err := runClient(clientBin, s, "-table", "-workspace", id, "-n", "20", "-inflight", "5", "-rounds", "2")
	if err != nil {
		t.Fatal(err)
	}
	if tr.SnapshotBytes >= r.SnapshotBytes*3/4 || tr.SnapshotBytes < r.SnapshotBytes/3 {
		t.Errorf("table snapshot %d bytes, object snapshot %d", tr.SnapshotBytes, r.SnapshotBytes)
	}
}
