package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/internal/testsupport"
)

// TestReplicasFollowAccountsAddedElsewhere: a running replica's reconciler
// picks up accounts it was never told of in process. An account added
// through replica A is reported ok by replica B while A lists it, and
// listed by B once A is gone (a box made in the provider's console shows
// up adopted on B), and so is one added with `companion accounts add --database-file`
// while B runs. `accounts remove --database-file` then respects the
// workspace lease another replica holds: refused while it is held, done
// once it is released.
func TestReplicasFollowAccountsAddedElsewhere(t *testing.T) {
	dtA, apiA := daytonaAPI(t)
	dtCLI, apiCLI := daytonaAPI(t)
	rs := startReplicas(t, 2, replicaOpts{Args: []string{"--reconcile-interval", "1s", "--lease-ttl", "2s"}})
	onA := rs.client(rs.Replicas[0].ready.URL)
	onB := rs.client(rs.Replicas[1].ready.URL)

	var added struct{ Account struct{ ID string } }
	onA.must(201, "POST", "/v1/accounts", map[string]any{"provider": "daytona", "label": "added on A",
		"config": map[string]string{"api_url": apiA}, "credentials": map[string]string{"token": sealedToken}}, &added)
	// A lists the account (it holds the account's lease); B, told of the
	// account by nothing but the database, reports the status A found.
	waitAccountOK(t, onB, added.Account.ID)
	// A crashes: only B's reconciler is left to list the account.
	rs.kill(0)
	foreign := dtA.Seed(daytona.SeedSandbox{Name: "made-in-the-console"}).ID
	adopted := waitAdopted(t, onB, added.Account.ID, foreign)
	waitAccountOK(t, onB, added.Account.ID)

	data := t.TempDir()
	cliAcct := rs.addAccountCLI(data, "added with the CLI", apiCLI)
	foreign2 := dtCLI.Seed(daytona.SeedSandbox{Name: "also-from-the-console"}).ID
	waitAdopted(t, onB, cliAcct, foreign2)
	waitAccountOK(t, onB, cliAcct)

	// Another replica is acting on the adopted workspace: it holds the
	// workspace's lease in the database.
	ctx := context.Background()
	st, err := db.OpenPostgres(ctx, rs.DB)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ok, _, err := st.TryLeaseWorkspace(ctx, adopted, "replica-elsewhere", time.Hour); !ok || err != nil {
		t.Fatalf("lease the adopted workspace: %v %v", ok, err)
	}
	remove := func() (string, string, int) {
		return runCLI(t, noKeyring, "", "accounts", "remove", added.Account.ID, "--user", "alice", "--database-file", rs.dbFile,
			"--data-dir", data, "--secrets", "sealed", "--secret-key-file", rs.SecretKey)
	}
	stdout, errs, code := remove()
	if code == 0 || !strings.Contains(errs, "an action is running on workspace "+adopted) {
		t.Fatalf("accounts remove while another replica holds a lease: exit %d: %s%s", code, stdout, errs)
	}
	if !slices.Contains(accountIDs(onB), added.Account.ID) {
		t.Fatalf("the refused remove removed the account")
	}
	if err := st.ReleaseWorkspaceLease(ctx, adopted, "replica-elsewhere"); err != nil {
		t.Fatal(err)
	}
	stdout, errs, code = remove()
	if code != 0 || !strings.Contains(stdout, "Removed account "+added.Account.ID) {
		t.Fatalf("accounts remove once the lease was released: exit %d: %s%s", code, stdout, errs)
	}
	if slices.Contains(accountIDs(onB), added.Account.ID) {
		t.Fatalf("B still lists the removed account")
	}
	if code, raw, _ := onB.do("GET", "/v1/workspaces/"+adopted, nil, nil); code != 404 {
		t.Fatalf("the removed account's workspace on B: %d %s, want 404", code, raw)
	}
}

// waitAdopted waits until the client sees box adopted as a workspace of
// account, and returns the workspace's id.
func waitAdopted(t *testing.T, c *webClient, account, box string) string {
	t.Helper()
	var id string
	testsupport.Poll(t, 60*time.Second, func() error {
		var list struct{ Workspaces []workspace }
		if code, raw, _ := c.do("GET", "/v1/workspaces", nil, &list); code != 200 {
			return fmt.Errorf("GET /v1/workspaces: %d %s", code, raw)
		}
		for _, w := range list.Workspaces {
			if w.BoxID == box {
				if !w.Adopted || w.AccountID != account {
					t.Fatalf("box %s is workspace %+v, want adopted on %s", box, w, account)
				}
				id = w.ID
				return nil
			}
		}
		return fmt.Errorf("box %s not adopted yet (%d workspaces)", box, len(list.Workspaces))
	})
	return id
}

// waitAccountOK waits until the client's GET /v1/accounts reports the
// account ok.
func waitAccountOK(t *testing.T, c *webClient, id string) {
	t.Helper()
	testsupport.Poll(t, 30*time.Second, func() error {
		var l accountsList
		_, raw, _ := c.do("GET", "/v1/accounts", nil, &l)
		for _, a := range l.Accounts {
			if a.ID == id && a.Status.State == "ok" {
				return nil
			}
		}
		return fmt.Errorf("account %s not ok: %s", id, raw)
	})
}

func accountIDs(c *webClient) []string {
	var l accountsList
	c.must(200, "GET", "/v1/accounts", nil, &l)
	var out []string
	for _, a := range l.Accounts {
		out = append(out, a.ID)
	}
	return out
}
