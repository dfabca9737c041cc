package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
)

// stagingOf lists the staging directories (and how many files each holds)
// of a workspace in the shared export dir.
func (rs *replicaSet) stagingOf(id string) map[string]int {
	rs.t.Helper()
	dirs, err := filepath.Glob(filepath.Join(rs.Exports, id, ".*.partial"))
	if err != nil {
		rs.t.Fatal(err)
	}
	out := map[string]int{}
	for _, d := range dirs {
		ents, _ := os.ReadDir(d)
		out[d] = len(ents)
	}
	return out
}

// TestKilledReplicasStagingIsSwept: replica 0 is killed (SIGKILL) in the
// middle of a delete's export, after it staged a file into the shared
// export dir, while replica 1 holds a live export of another workspace
// (held after its first staged file). Replica 1 takes the delete over:
// the dead replica's staging directory is removed (its record failed),
// the delete's new export is verified and stays, and the live export's
// staging directory is untouched; released, the live export verifies.
func TestKilledReplicasStagingIsSwept(t *testing.T) {
	hold := t.TempDir()
	rs := startReplicas(t, 2, replicaOpts{Args: []string{"--lease-ttl", replicaLease},
		Env: []string{"COMPANION_TEST_EXPORT_HOLD=" + hold}})
	other := rs.client(rs.Replicas[1].ready.URL)
	liveID, _ := rs.createOn(other, "live")
	doomedID, _ := rs.createOn(other, "doomed")

	// A live export on replica 1, held once it has staged a file.
	if err := os.WriteFile(filepath.Join(hold, liveID), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var started struct{ Export exportRec }
	other.must(202, "POST", "/v1/workspaces/"+liveID+"/export", nil, &started)
	var live string
	testsupport.Poll(t, 2*time.Minute, func() error {
		for d, n := range rs.stagingOf(liveID) {
			if n > 0 && strings.Contains(d, started.Export.ID) {
				live = d
				return nil
			}
		}
		return fmt.Errorf("no staged file of export %s yet: %v", started.Export.ID, rs.stagingOf(liveID))
	})

	// Replica 0 dies mid-export of a delete.
	victim := rs.start(0, "COMPANION_TEST_CRASH_AT=export:staged")
	rs.deleteCrashing(victim, doomedID)
	select {
	case <-victim.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("replica 0 did not crash in the export\n%s", victim.stderr.String())
	}
	if ws, ok := victim.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("replica 0 ended with %v, want SIGKILL at the crash point", victim.exit)
	}
	rs.kill(0)
	dead := rs.stagingOf(doomedID)
	if len(dead) != 1 {
		t.Fatalf("after the crash the doomed workspace has staging %v, want one directory", dead)
	}
	for d, n := range dead {
		if n == 0 {
			t.Fatalf("the dead replica's staging %s holds no file", d)
		}
	}

	// Replica 1 takes the delete over and finishes it.
	if w := rs.waitSettled(doomedID, 3*time.Minute); !w.Removed {
		t.Fatalf("after the takeover the workspace is %+v, want removed", w)
	}
	for d := range dead {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("the dead replica's staging %s is still there (%v)", d, err)
		}
	}
	if left := rs.stagingOf(doomedID); len(left) != 0 {
		t.Errorf("staging left for the deleted workspace: %v", left)
	}
	exps := rs.verifiedExportsVia(other, doomedID)
	if len(exps) != 1 {
		t.Fatalf("%d verified exports of the deleted workspace, want 1", len(exps))
	}
	finals, _ := filepath.Glob(filepath.Join(rs.Exports, doomedID, "*", "manifest.json"))
	if len(finals) != 1 {
		t.Fatalf("verified export directories of the deleted workspace: %v, want one", finals)
	}
	if !strings.Contains(rs.Replicas[1].stderr.String(), "removed the staging files of an export nobody writes") {
		t.Errorf("replica 1 did not log the removal\n%s", rs.Replicas[1].stderr.String())
	}

	// The live export was not touched, and finishes when released.
	if n, ok := rs.stagingOf(liveID)[live]; !ok || n == 0 {
		t.Fatalf("the live export's staging %s was touched: %v", live, rs.stagingOf(liveID))
	}
	var rec exportRec
	other.must(200, "GET", "/v1/exports/"+started.Export.ID, nil, &struct{ Export *exportRec }{&rec})
	if rec.State != "running" {
		t.Fatalf("the live export is %s, want running", rec.State)
	}
	if err := os.Remove(filepath.Join(hold, liveID)); err != nil {
		t.Fatal(err)
	}
	testsupport.Poll(t, 2*time.Minute, func() error {
		other.must(200, "GET", "/v1/exports/"+started.Export.ID, nil, &struct{ Export *exportRec }{&rec})
		if rec.State == "running" {
			return fmt.Errorf("export %s still running", rec.ID)
		}
		return nil
	})
	if !rec.Verified {
		t.Fatalf("the live export ended %+v, want verified", rec)
	}
	if left := rs.stagingOf(liveID); len(left) != 0 {
		t.Errorf("staging left after the live export verified: %v", left)
	}
}
