package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// The delete pipeline's cloud tests run on a Daytona farm (cloudfarm_test.go):
// the Daytona emulator with a real agent-server emulator process behind
// each sandbox's preview port, answering from a directory that stands for
// the box's disk.

// farm is a Daytona cloud farm; f.dt is its emulator.
type farm struct{ *cloudFarm }

func newFarm(t *testing.T) *farm { return &farm{newCloudFarm(t, "daytona")} }

// order checks, from the request log, that box's archive was read
// (answered 200) before its provider DELETE, and that the DELETE
// happened at all when deleted is true.
func (f *farm) order(t *testing.T, box string, deleted bool) {
	t.Helper()
	archive, del := -1, -1
	host := "8000-" + box + "."
	for i, l := range f.requests() {
		switch {
		case strings.Contains(l, host) && strings.Contains(l, "/api/file/archive") && strings.HasSuffix(l, "-> 200"):
			if del < 0 {
				archive = i
			}
		case strings.HasPrefix(l, "DELETE ") && strings.Contains(l, "/sandbox/"+box) && !strings.Contains(l, host):
			if del < 0 {
				del = i
			}
		}
	}
	if deleted && del < 0 {
		t.Fatalf("no provider DELETE of %s in the log:\n%s", box, strings.Join(f.requests(), "\n"))
	}
	if !deleted && del >= 0 {
		t.Fatalf("box %s was deleted at the provider:\n%s", box, strings.Join(f.requests(), "\n"))
	}
	if deleted && (archive < 0 || archive > del) {
		t.Fatalf("box %s: provider DELETE (request %d) without a verified archive read before it (request %d):\n%s", box, del, archive, strings.Join(f.requests(), "\n"))
	}
}

// previewAndDeleteCrashing is deleteConfirmed for a companion armed to
// crash at an early step: the crash may come before the answer is
// written, so the delete request may end without one (a 202 or a broken
// connection are both fine; any other answer is not).
func previewAndDeleteCrashing(p *proc, id string) {
	p.t.Helper()
	var pv deletePreview
	p.must(200, "POST", "/v1/workspaces/"+id+"/delete-preview", nil, &pv)
	body := strings.NewReader(`{"token":"` + pv.Token + `"}`)
	req, err := http.NewRequest("POST", p.ready.URL+"/v1/workspaces/"+id+"/delete", body)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.ready.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return // the process died before it answered
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		p.t.Fatalf("delete answered %d, want 202", resp.StatusCode)
	}
}

// deletePreview is the wire form of a delete preview.
type deletePreview struct {
	Token    string   `json:"token"`
	Lost     []string `json:"lost"`
	Survives []string `json:"survives"`
	Export   struct {
		Will        bool     `json:"will"`
		Why         string   `json:"why"`
		Mode        string   `json:"mode"`
		Captures    []string `json:"captures"`
		Format      string   `json:"format"`
		ArchivePath string   `json:"archive_path"`
		Wake        bool     `json:"wake"`
		Snapshot    bool     `json:"snapshot"`
		Location    string   `json:"location"`
	} `json:"export"`
}

// deleteConfirmed deletes id the way a person does: the preview, then the
// delete with the preview's token (answered 202). The delete goes on in
// the background. It returns the preview.
func (p *proc) deleteConfirmed(id string) deletePreview {
	p.t.Helper()
	var pv deletePreview
	p.must(200, "POST", "/v1/workspaces/"+id+"/delete-preview", nil, &pv)
	p.must(202, "POST", "/v1/workspaces/"+id+"/delete", map[string]string{"token": pv.Token}, nil)
	return pv
}

// waitRemoved polls until the workspace is gone from the API.
func (p *proc) waitRemoved(id string, timeout time.Duration) {
	p.t.Helper()
	testsupport.Poll(p.t, timeout, func() error {
		code, raw := p.call("GET", "/v1/workspaces/"+id, nil, nil)
		if code == 404 {
			return nil
		}
		return fmt.Errorf("workspace %s still there: %d %s", id, code, raw)
	})
}

// waitBlocked polls until the workspace's error says its delete was
// blocked, and returns it.
func (p *proc) waitBlocked(id string, timeout time.Duration) workspace {
	p.t.Helper()
	var got struct{ Workspace workspace }
	testsupport.Poll(p.t, timeout, func() error {
		code, raw := p.call("GET", "/v1/workspaces/"+id, nil, &got)
		if code == 200 && strings.HasPrefix(got.Workspace.Error, "delete blocked: ") && got.Workspace.State != "deleting" {
			return nil
		}
		return fmt.Errorf("workspace %s not blocked: %d %s", id, code, raw)
	})
	return got.Workspace
}

// verifiedExports lists the workspace's verified exports.
func (p *proc) verifiedExports(id string) []exportRec {
	p.t.Helper()
	var list struct{ Exports []exportRec }
	p.must(200, "GET", "/v1/workspaces/"+id+"/exports", nil, &list)
	var out []exportRec
	for _, e := range list.Exports {
		if e.Verified {
			out = append(out, e)
		}
	}
	return out
}

// auditOf returns the audit entries of a workspace, newest first.
func (p *proc) auditOf(id string) []auditEntry {
	p.t.Helper()
	var page struct{ Entries []auditEntry }
	p.must(200, "GET", "/v1/audit?limit=500", nil, &page)
	var out []auditEntry
	for _, e := range page.Entries {
		if e.WorkspaceID == id {
			out = append(out, e)
		}
	}
	return out
}

// deleteOutcome is the newest delete outcome entry (not "started").
func deleteOutcome(entries []auditEntry) (auditEntry, bool) {
	for _, e := range entries {
		if e.Action == "delete" && e.Outcome != "started" {
			return e, true
		}
	}
	return auditEntry{}, false
}

// deleteAudit waits for the delete's outcome entry: it is appended just
// after the workspace's last change is published.
func (p *proc) deleteAudit(id string) auditEntry {
	p.t.Helper()
	var e auditEntry
	testsupport.Poll(p.t, 30*time.Second, func() error {
		var ok bool
		if e, ok = deleteOutcome(p.auditOf(id)); !ok {
			return fmt.Errorf("no delete outcome audited for %s yet", id)
		}
		return nil
	})
	return e
}
