package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// goneExport is a wire export as GET /v1/exports?gone=true lists it.
type goneExport struct {
	exportRec
	WorkspaceName *string `json:"workspace_name"`
	Provider      *string `json:"provider"`
	AccountID     *string `json:"account_id"`
	Restorable    bool    `json:"restorable"`
}

type gonePage struct {
	Exports    []goneExport `json:"exports"`
	NextBefore *string      `json:"next_before"`
}

// fileSHA256 hashes a file once it is complete (Chromium writes a
// download under another name first).
func fileSHA256(path string, size int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", err
	}
	if n != size {
		return "", fmt.Errorf("%s holds %d of %d bytes", path, n, size)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// TestPageDeletedWorkspaces: through the binary, real Docker and headless
// Chromium. A Docker workspace with a manual export is deleted from the
// page; once the stream says it is removed, the Deleted workspaces
// section (hidden until then) lists its exports with its name; a file
// downloads from there and matches the export record's SHA-256; Restore
// opens the dialog, which shows the server's preview (method, what comes
// back, what cannot) before anything is made; confirming makes a new
// workspace that runs, and the section still lists the export. The
// per-workspace exports list opens the same dialog.
func TestPageDeletedWorkspaces(t *testing.T) {
	image, scope := idleBoxImage(t), dockerScope(t)
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-image", image, "--docker-scope", scope}})
	ws := p.createRunning("doomed")["doomed"]
	putTree(t, ws.BoxID, "/workspace", map[string]string{"notes/todo.txt": "restore me\n", "main.go": "package main\n"})
	manual := p.exportVerified(ws.ID)

	tb := openTab(t, p.ready.PageURL, 1400, 1200)
	tb.waitJS("doomed running", stateIs(ws.ID, "running"), 30*time.Second)
	if !evalIn[bool](tb, `document.querySelector("#gone").hidden`) {
		t.Fatal("Deleted workspaces is shown with no deleted workspace")
	}

	// The per-workspace list opens the restore dialog too (and closes it).
	tb.click(row(ws.ID) + ` button[data-action="exports"]`)
	sel := fmt.Sprintf(`#exports-table tr[data-export=%q] button[data-action="restore"]`, manual.ID)
	tb.waitJS("Restore in the workspace's exports", fmt.Sprintf(`document.querySelector(%q)`, sel), 30*time.Second)
	tb.click(sel)
	tb.waitJS("the dialog's preview", `document.querySelector("#restore-dialog").open && !document.querySelector("#rd-plan").hidden`, 30*time.Second)
	tb.click("#rd-cancel")
	tb.waitJS("the dialog closed", `!document.querySelector("#restore-dialog").open`, 10*time.Second)
	tb.click("#x-close")

	// Delete from the page.
	tb.click(row(ws.ID) + ` button[data-action="delete"]`)
	tb.waitJS("the delete preview", `document.querySelector("#delete-dialog").open && !document.querySelector("#dd-ack").disabled`, 30*time.Second)
	tb.click("#dd-ack")
	tb.click("#dd-confirm")
	tb.waitJS("the delete's end", `document.querySelector("#dd-progress").textContent.startsWith("Deleted.")`, 3*time.Minute)
	tb.click("#dd-cancel")

	// The section appears by itself, listing both exports (the manual one
	// and the delete's) under the workspace's name.
	goneRow := fmt.Sprintf(`#gone-table tr[data-export=%q]`, manual.ID)
	tb.waitJS("the deleted workspace's export", fmt.Sprintf(`!document.querySelector("#gone").hidden && document.querySelector(%q)`, goneRow), 30*time.Second)
	var listed gonePage
	p.must(200, "GET", "/v1/exports?gone=true", nil, &listed)
	if len(listed.Exports) != 2 {
		t.Fatalf("GET /v1/exports?gone=true lists %d exports, want the manual one and the delete's: %+v", len(listed.Exports), listed)
	}
	tb.waitJS("both exports in the section", `document.querySelectorAll("#gone-table tbody tr").length === 2`, 10*time.Second)
	if got := tb.text(goneRow + ` td.name`); !strings.HasPrefix(got, "doomed") || !strings.Contains(got, ws.ID) {
		t.Errorf("the row names %q, want doomed and its id", got)
	}
	if got := tb.text(goneRow); !strings.Contains(got, "docker") || !strings.Contains(got, "verified") {
		t.Errorf("the row %q does not show the provider and the state", got)
	}

	// A file downloads from the section and is what the export recorded.
	var archive exportFile
	for _, f := range manual.Files {
		if f.Kind == "archive" {
			archive = f
		}
	}
	if archive.Name == "" {
		t.Fatalf("the manual export has no archive: %+v", manual.Files)
	}
	downloads := t.TempDir()
	tb.allowDownloads(downloads)
	tb.click(fmt.Sprintf(`%s button[data-file=%q]`, goneRow, archive.Name))
	testsupport.Poll(t, 60*time.Second, func() error {
		got, err := fileSHA256(filepath.Join(downloads, archive.Name), archive.Bytes)
		if err != nil {
			return err
		}
		if got != archive.SHA256 {
			t.Fatalf("the downloaded %s has SHA-256 %s, the export recorded %s", archive.Name, got, archive.SHA256)
		}
		return nil
	})

	// Restore: the dialog shows the server's preview before anything is made.
	var pv struct{ Restore restorePreview }
	p.must(200, "GET", "/v1/exports/"+manual.ID+"/restore-preview", nil, &pv)
	tb.click(goneRow + ` button[data-action="restore"]`)
	tb.waitJS("the restore preview", `document.querySelector("#restore-dialog").open && !document.querySelector("#rd-plan").hidden && !document.querySelector("#rd-confirm").disabled`, 30*time.Second)
	if got := evalIn[string](tb, `document.querySelector("#rd-method").dataset.method`); got != pv.Restore.Method {
		t.Errorf("the dialog shows method %q, the preview says %q", got, pv.Restore.Method)
	}
	if got := tb.text("#rd-method"); !strings.Contains(got, pv.Restore.Method) {
		t.Errorf("the dialog's method line %q does not name %q", got, pv.Restore.Method)
	}
	items := func(id string) []string {
		return evalIn[[]string](tb, fmt.Sprintf(`[...document.querySelectorAll("#%s li")].map(li => li.textContent)`, id))
	}
	if got := items("rd-cannot"); len(got) == 0 || !reflect.DeepEqual(got, pv.Restore.Cannot) {
		t.Errorf("the dialog's cannot list %q, the preview's %q", got, pv.Restore.Cannot)
	}
	if got := items("rd-brings"); !reflect.DeepEqual(got, pv.Restore.BringsBack) {
		t.Errorf("the dialog's brings-back list %q, the preview's %q", got, pv.Restore.BringsBack)
	}
	var accts struct {
		Accounts []struct{ ID, Label string }
	}
	p.must(200, "GET", "/v1/accounts", nil, &accts)
	label := pv.Restore.AccountID
	for _, a := range accts.Accounts {
		if a.ID == pv.Restore.AccountID && a.Label != "" {
			label = a.Label
		}
	}
	if got := tb.text("#rd-status"); !strings.Contains(got, "chosen by companion") || !strings.Contains(got, "account "+label+" ") {
		t.Errorf("with no account picked the dialog says %q; want companion's choice, account %s", got, label)
	}
	if n := len(p.listWorkspaces()); n != 0 {
		t.Fatalf("the preview made %d workspaces", n)
	}
	// Picking the account asks again, for that account.
	tb.choose("#rd-account", "local-docker")
	tb.waitJS("the picked account's preview", `!document.querySelector("#rd-plan").hidden && !document.querySelector("#rd-status").textContent.includes("chosen by companion")`, 30*time.Second)

	tb.click("#rd-confirm")
	restored := p.workspaceNamed("doomed (restored)")
	tb.waitJS("the restored workspace running", stateIs(restored, "running"), 3*time.Minute)
	tb.waitJS("the dialog says it is restored", `document.querySelector("#rd-progress").textContent.startsWith("Restored: ")`, 30*time.Second)
	if got, err := boxFile(t, p.waitState(restored, "running", time.Minute).BoxID, "/workspace/notes/todo.txt"); err != nil || got != "restore me\n" {
		t.Errorf("the restored box's notes/todo.txt = %q, %v", got, err)
	}
	tb.click("#rd-cancel")
	tb.waitJS("the export still listed", fmt.Sprintf(`!document.querySelector("#gone").hidden && document.querySelector(%q)`, goneRow), 10*time.Second)
	tb.checkClean(probed...)
}

// listWorkspaces is GET /v1/workspaces's list.
func (p *proc) listWorkspaces() []workspace {
	p.t.Helper()
	var list struct{ Workspaces []workspace }
	p.must(200, "GET", "/v1/workspaces", nil, &list)
	return list.Workspaces
}

// TestGoneExportsAPI: serve mode with two users and real Docker. alice
// deletes three workspaces one after another and keeps a fourth with a
// manual export; bob deletes one. GET /v1/exports?gone=true gives alice
// her three deleted workspaces' exports, newest first, with what they
// were of, paged by limit and next_before; never bob's, nor her live
// workspace's; bob sees only his; a cursor of someone else's export and
// a listing without gone=true are 400.
func TestGoneExportsAPI(t *testing.T) {
	image, scope := idleBoxImage(t), dockerScope(t)
	data := t.TempDir()
	addUser(t, data, "alice", "alice-password-1")
	addUser(t, data, "bob", "bob-password-22")
	p := start(t, options{mode: "serve", dataDir: data, args: []string{"--auth", "local", "--docker-image", image, "--docker-scope", scope}})
	alice, bob := newWebClient(t, p.ready.URL), newWebClient(t, p.ready.URL)
	alice.login("alice", "alice-password-1")
	bob.login("bob", "bob-password-22")

	create := func(c *webClient, name string) string {
		var ws struct{ Workspace workspace }
		c.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": "local-docker", "name": name}, &ws)
		testsupport.Poll(t, 2*time.Minute, func() error {
			c.must(200, "GET", "/v1/workspaces/"+ws.Workspace.ID, nil, &ws)
			if ws.Workspace.State != "running" {
				return fmt.Errorf("%s is %s", name, ws.Workspace.State)
			}
			return nil
		})
		return ws.Workspace.ID
	}
	remove := func(c *webClient, id string) {
		var pv deletePreview
		c.must(200, "POST", "/v1/workspaces/"+id+"/delete-preview", nil, &pv)
		c.must(202, "POST", "/v1/workspaces/"+id+"/delete", map[string]string{"token": pv.Token}, nil)
		testsupport.Poll(t, 3*time.Minute, func() error {
			if code, raw, _ := c.do("GET", "/v1/workspaces/"+id, nil, nil); code != 404 {
				return fmt.Errorf("workspace %s still there: %d %s", id, code, raw)
			}
			return nil
		})
	}
	list := func(c *webClient, query string) gonePage {
		var pg gonePage
		c.must(200, "GET", "/v1/exports"+query, nil, &pg)
		return pg
	}

	kept := create(alice, "kept")
	var started struct{ Export exportRec }
	alice.must(202, "POST", "/v1/workspaces/"+kept+"/export", nil, &started)
	bobs := create(bob, "bobs")
	var deleted []string
	for _, name := range []string{"first", "second", "third"} {
		id := create(alice, name)
		remove(alice, id)
		deleted = append([]string{id}, deleted...) // newest first
	}
	remove(bob, bobs)

	all := list(alice, "?gone=true")
	var got []string
	for _, x := range all.Exports {
		got = append(got, x.WorkspaceID)
		if x.WorkspaceName == nil || x.Provider == nil || *x.Provider != "docker" || x.AccountID == nil || *x.AccountID != "local-docker" ||
			!x.Verified || !x.Restorable || len(x.Files) == 0 {
			t.Errorf("listed export %+v lacks what it was of, or is not a verified, restorable export", x)
		}
	}
	if !reflect.DeepEqual(got, deleted) || all.NextBefore != nil {
		t.Fatalf("alice's gone exports are of %v (next %v), want %v (first, second, third, newest first)", got, all.NextBefore, deleted)
	}
	if names := []string{*all.Exports[0].WorkspaceName, *all.Exports[2].WorkspaceName}; names[0] != "third" || names[1] != "first" {
		t.Errorf("workspace names %q, want third … first", names)
	}

	// Paged by two: the same list, then no next page.
	first := list(alice, "?gone=true&limit=2")
	if len(first.Exports) != 2 || first.NextBefore == nil || *first.NextBefore != first.Exports[1].ID {
		t.Fatalf("first page of 2: %+v", first)
	}
	rest := list(alice, "?gone=true&limit=2&before="+*first.NextBefore)
	if len(rest.Exports) != 1 || rest.NextBefore != nil || rest.Exports[0].ID != all.Exports[2].ID {
		t.Fatalf("second page of 2: %+v, want the last export and no next page", rest)
	}

	// bob sees his own only; neither may page from the other's export.
	theirs := list(bob, "?gone=true")
	if len(theirs.Exports) != 1 || theirs.Exports[0].WorkspaceID != bobs {
		t.Fatalf("bob's gone exports: %+v, want his deleted workspace's only", theirs)
	}
	for _, x := range all.Exports {
		if x.ID == theirs.Exports[0].ID {
			t.Fatal("alice lists bob's export")
		}
	}
	alice.must(400, "GET", "/v1/exports?gone=true&before="+theirs.Exports[0].ID, nil, nil)
	alice.must(404, "GET", "/v1/exports/"+theirs.Exports[0].ID, nil, nil)
	bob.must(400, "GET", "/v1/exports?gone=true&before="+all.Exports[0].ID, nil, nil)
	if raw := alice.must(400, "GET", "/v1/exports", nil, nil); !strings.Contains(string(raw), "gone=true") {
		t.Errorf("without gone=true: %s, want it to name gone=true", raw)
	}
	newWebClient(t, p.ready.URL).must(401, "GET", "/v1/exports?gone=true", nil, nil)
}
