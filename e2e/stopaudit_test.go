package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	_ "modernc.org/sqlite"

	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/internal/testsupport"
)

// stopped is the part of the wire workspace this file checks.
type stopped struct {
	ID         string     `json:"id"`
	State      string     `json:"state"`
	PausedAt   *time.Time `json:"paused_at"`
	StopReason *string    `json:"stop_reason"`
	ExitCode   *int       `json:"exit_code"`
}

func (p *proc) stopState(id string) stopped {
	p.t.Helper()
	var got struct{ Workspace stopped }
	p.must(200, "GET", "/v1/workspaces/"+id, nil, &got)
	return got.Workspace
}

func reasonOf(s stopped) string {
	if s.StopReason == nil {
		return "<null>"
	}
	return *s.StopReason
}

func dockerCLI(t *testing.T) *client.Client {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestStoppedIsNotPaused: through the binary and real Docker, a box whose
// process is killed from inside the engine (no stop asked) is reported
// stopped/crashed with its exit code and no paused_at, on HTTP and on the
// stream; companion's pause is paused/companion; a `docker stop` from
// outside is paused/outside.
func TestStoppedIsNotPaused(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-image", image, "--docker-scope", scope}})
	s := p.dial(-1)
	s.next(10 * time.Second)
	cli := dockerCLI(t)
	ctx := context.Background()

	ids := map[string]string{}
	boxes := map[string]string{}
	for _, name := range []string{"crash", "mine", "outside"} {
		var created struct{ Workspace workspace }
		p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": name}, &created)
		ids[name] = created.Workspace.ID
	}
	for name, id := range ids {
		boxes[name] = p.waitState(id, "running", 90*time.Second).BoxID
	}

	// A crash: the box's process is killed, nobody asked for a stop.
	if _, err := cli.ContainerKill(ctx, boxes["crash"], client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	m := s.waitFor("crashed upsert", 60*time.Second, upsertOf(ids["crash"], "stopped"))
	var streamed struct{ Workspace stopped }
	if err := json.Unmarshal(m.Raw, &streamed); err != nil {
		t.Fatal(err)
	}
	for where, w := range map[string]stopped{"stream": streamed.Workspace, "http": p.stopState(ids["crash"])} {
		if w.State != "stopped" || reasonOf(w) != "crashed" || w.ExitCode == nil || *w.ExitCode != 137 || w.PausedAt != nil {
			t.Errorf("%s: crashed box reported as %+v (reason %s); want stopped, crashed, exit 137, no paused_at", where, w, reasonOf(w))
		}
	}

	// Companion's own pause.
	p.must(202, "POST", "/v1/workspaces/"+ids["mine"]+"/pause", nil, nil)
	p.waitState(ids["mine"], "paused", 60*time.Second)
	if w := p.stopState(ids["mine"]); reasonOf(w) != "companion" || w.PausedAt == nil {
		t.Errorf("companion's pause reported as %+v (reason %s); want reason companion with paused_at", w, reasonOf(w))
	}

	// A person stops the box at the engine.
	if _, err := cli.ContainerStop(ctx, boxes["outside"], client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}
	w := p.waitState(ids["outside"], "paused", 60*time.Second)
	if sw := p.stopState(ids["outside"]); reasonOf(sw) != "outside" || w.PausedAt == nil {
		t.Errorf("docker stop from outside reported as %+v (reason %s); want reason outside with paused_at", sw, reasonOf(sw))
	}

	// Only a reconcile pass sees the outside stop, and it read every box
	// of the account: companion's pause must not have been rewritten as
	// "outside" by that later read of the engine.
	if w := p.stopState(ids["mine"]); reasonOf(w) != "companion" {
		t.Errorf("after a reconcile pass companion's pause reads %s", reasonOf(w))
	}

	// A crashed box resumes like a paused one; the reason goes away.
	p.must(202, "POST", "/v1/workspaces/"+ids["crash"]+"/resume", nil, nil)
	p.waitState(ids["crash"], "running", 60*time.Second)
	if w := p.stopState(ids["crash"]); w.StopReason != nil || w.ExitCode != nil {
		t.Errorf("resumed box still carries %+v", w)
	}
}

type auditEntry struct {
	ID           int64     `json:"id"`
	At           time.Time `json:"at"`
	Actor        string    `json:"actor"`
	Action       string    `json:"action"`
	WorkspaceID  string    `json:"workspace_id"`
	AccountID    string    `json:"account_id"`
	Provider     string    `json:"provider"`
	Outcome      string    `json:"outcome"`
	ExportSHA256 *string   `json:"export_sha256"`
	Hash         string    `json:"hash"`
}

type auditPage struct {
	Entries    []auditEntry `json:"entries"`
	NextBefore *int64       `json:"next_before"`
}

// auditVerify runs `companion audit verify` on dataDir.
func auditVerify(t *testing.T, dataDir string) (int, string) {
	t.Helper()
	cmd := exec.Command(companionBin, "audit", "verify", "--data-dir", dataDir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("audit verify: %v", err)
	return -1, ""
}

// TestAuditTrail: every pause, resume, delete, create and account add and
// remove made over HTTP appears in GET /v1/audit, newest first, paged,
// with who did it; `companion audit verify` accepts the trail, and after
// one row is edited in the SQLite file (companion stopped) it fails and
// names that row. Needs the keyring (the Daytona account's token).
func TestAuditTrail(t *testing.T) {
	image, scope := idleBoxImage(t), dockerScope(t)
	dt := daytona.New(daytona.Options{Token: cloudToken, Clock: emulator.NewWallClock(), Delays: &daytona.Delays{}})
	srv := httptest.NewServer(dt.Handler())
	t.Cleanup(func() { dt.Close(); srv.Close() })
	dataDir := t.TempDir()
	p := start(t, options{dataDir: dataDir, args: []string{"--docker-image", image, "--docker-scope", scope}})

	var acct struct{ Account struct{ ID string } }
	p.must(201, "POST", "/v1/accounts", map[string]any{
		"provider": "daytona", "label": "audited", "config": map[string]string{"api_url": srv.URL + "/api"},
		"credentials": map[string]string{"token": cloudToken},
	}, &acct)
	p.must(204, "DELETE", "/v1/accounts/"+acct.Account.ID, nil, nil)

	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "audited"}, &created)
	id := created.Workspace.ID
	p.waitState(id, "running", 90*time.Second)
	p.must(202, "POST", "/v1/workspaces/"+id+"/pause", nil, nil)
	p.waitState(id, "paused", 60*time.Second)
	p.must(202, "POST", "/v1/workspaces/"+id+"/resume", nil, nil)
	p.waitState(id, "running", 60*time.Second)
	p.deleteConfirmed(id)
	p.waitRemoved(id, 60*time.Second)

	// The outcome of the delete is written right after the workspace
	// goes; wait for it, then page through everything 3 at a time.
	var all []auditEntry
	testsupport.Poll(t, 10*time.Second, func() error {
		all = all[:0]
		path := "/v1/audit?limit=3"
		for pages := 0; pages < 20; pages++ {
			var pg auditPage
			p.must(200, "GET", path, nil, &pg)
			if len(pg.Entries) > 3 {
				t.Fatalf("limit=3 answered %d entries", len(pg.Entries))
			}
			all = append(all, pg.Entries...)
			if pg.NextBefore == nil {
				break
			}
			path = fmt.Sprintf("/v1/audit?limit=3&before=%d", *pg.NextBefore)
		}
		if len(all) == 0 || all[0].Action != "delete" || all[0].Outcome != "ok" {
			return fmt.Errorf("newest entry is not the delete's outcome: %+v", all)
		}
		return nil
	})
	var got []string
	for i, e := range all {
		if i > 0 && e.ID >= all[i-1].ID {
			t.Errorf("entries not newest first: %d after %d", e.ID, all[i-1].ID)
		}
		// The delete exported first (the delete pipeline): the export's
		// outcome and the delete's carry the archive's SHA-256.
		withExport := (e.Action == "export" || e.Action == "delete") && e.Outcome == "ok"
		if e.Actor != "desktop token" || e.At.IsZero() || e.Hash == "" || (e.ExportSHA256 != nil) != withExport {
			t.Errorf("entry %+v: want actor desktop token, a time, a hash, an export hash only on export and delete outcomes", e)
		}
		got = append([]string{e.Action + ":" + strings.SplitN(e.Outcome, " ", 2)[0]}, got...)
	}
	want := []string{"account_add:ok", "account_remove:ok", "create:started", "create:ok", "pause:started", "pause:ok",
		"resume:started", "resume:ok", "delete:started", "export:started", "export:ok", "delete:ok"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("audit trail, oldest first:\n got %v\nwant %v", got, want)
	}
	for _, e := range all {
		if strings.HasPrefix(e.Action, "account_") && (e.AccountID != acct.Account.ID || e.Provider != "daytona") {
			t.Errorf("account entry %+v does not name the account", e)
		}
		if !strings.HasPrefix(e.Action, "account_") && (e.WorkspaceID != id || e.AccountID != "local-docker" || e.Provider != "docker") {
			t.Errorf("workspace entry %+v does not name the workspace", e)
		}
	}
	// The same trail as JSON lines, for a log shipper: every entry, the
	// same objects, and from a cursor.
	resp, body := p.get("/v1/audit?format=jsonl", nil)
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" || len(lines) != len(all) {
		t.Fatalf("jsonl: %d %s, %d lines; want 200 application/x-ndjson with the %d entries", resp.StatusCode, resp.Header.Get("Content-Type"), len(lines), len(all))
	}
	for i, line := range lines {
		var e auditEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.ID != all[i].ID || e.Hash != all[i].Hash {
			t.Fatalf("jsonl line %d = %s (%v); want entry %d", i, line, err, all[i].ID)
		}
	}
	if _, body := p.get(fmt.Sprintf("/v1/audit?format=jsonl&before=%d&limit=2", all[0].ID), nil); strings.Count(string(body), "\n") != 2 ||
		!strings.Contains(string(body), fmt.Sprintf(`"id":%d`, all[1].ID)) {
		t.Fatalf("jsonl from a cursor, 2 entries: %s", body)
	}
	var bad struct {
		Error struct{ Code, Message string }
	}
	p.must(400, "GET", "/v1/audit?format=csv", nil, &bad)
	if !strings.Contains(bad.Error.Message, "jsonl") {
		t.Errorf("format=csv error does not name the formats: %+v", bad)
	}
	p.must(400, "GET", "/v1/audit?limit=0", nil, &bad)
	if !strings.Contains(bad.Error.Message, "limit") {
		t.Errorf("limit=0 error does not name limit: %+v", bad)
	}
	p.must(400, "GET", "/v1/audit?before=x", nil, nil)
	p.stop()

	if code, out := auditVerify(t, dataDir); code != 0 || !strings.Contains(out, "12 entries verified") {
		t.Fatalf("audit verify of an untouched trail: exit %d\n%s", code, out)
	}
	victim := all[len(all)-5] // a middle entry: pause started (oldest first: account add, remove, create ×2, pause started)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dataDir, "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE audit SET actor = 'someone else' WHERE id = ?`, victim.ID); err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, out := auditVerify(t, dataDir)
	if code != 1 || !strings.Contains(out, fmt.Sprintf("entry %d", victim.ID)) {
		t.Fatalf("audit verify after editing entry %d: exit %d, want 1 naming it\n%s", victim.ID, code, out)
	}
}

// TestAuditActorServeMode: in serve mode the launch token's requests are
// recorded as "serve local", not as the desktop's token.
func TestAuditActorServeMode(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	p := start(t, options{mode: "serve", dataDir: t.TempDir(), args: []string{"--listen", "127.0.0.1:0", "--docker-image", image, "--docker-scope", scope}})
	var created struct{ Workspace workspace }
	p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": "served"}, &created)
	p.waitState(created.Workspace.ID, "running", 90*time.Second)
	var pg auditPage
	testsupport.Poll(t, 10*time.Second, func() error {
		p.must(200, "GET", "/v1/audit", nil, &pg)
		if len(pg.Entries) != 2 || pg.Entries[0].Outcome != "ok" {
			return fmt.Errorf("want create started and ok, got %+v", pg.Entries)
		}
		return nil
	})
	for _, e := range pg.Entries {
		if e.Actor != "serve local" || e.Action != "create" || e.WorkspaceID != created.Workspace.ID {
			t.Errorf("serve-mode entry %+v: want a create by serve local", e)
		}
	}
	if pg.NextBefore != nil {
		t.Errorf("a single page has next_before %d", *pg.NextBefore)
	}
}
