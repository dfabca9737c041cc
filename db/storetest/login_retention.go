package storetest

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"
)

// The cases of the store areas main gained after the first PostgreSQL
// store: retention, users/sessions/tokens, restores, account settings.
func init() {
	Cases["RetentionClaimsTwoHandles"] = retentionClaimsTwoHandles
	Cases["RetentionPoliciesAndWarnings"] = retentionPoliciesAndWarnings
	Cases["UsersSessionsTokens"] = usersSessionsTokens
	Cases["Restores"] = restores
	Cases["AccountSettings"] = accountSettings
	Cases["DeleteJournalPayload"] = deleteJournalPayload
}

// dueWorkspace saves a live workspace of acc whose delete_after is at.
func dueWorkspace(t *testing.T, s Store, id, acc string, at time.Time) {
	t.Helper()
	ws := core.Workspace{ID: id, Name: id, AccountID: acc, Provider: "docker", State: core.StatePaused, DeleteAfter: at}
	must(s.SaveWorkspace(context.Background(), ws))
}

// retentionClaimsTwoHandles: two handles on one database (two replicas)
// never both hold a claim; a lapsed lease is taken over; the backoff holds
// off everyone; only the holder saves.
func retentionClaimsTwoHandles(t *testing.T, e Engine) {
	ctx := context.Background()
	a, reopen, _ := open(t, e)
	b := reopen()
	must(0, a.PutAccount(ctx, core.Account{ID: "acc", Provider: "docker", Label: "d", CreatedAt: epoch}))
	dueWorkspace(t, a, "ws_due", "acc", epoch.Add(-time.Hour))
	dueWorkspace(t, a, "ws_later", "acc", epoch.Add(time.Hour))
	for name, s := range map[string]Store{"a": a, "b": b} {
		due := must(s.RetentionDue(ctx, "acc", epoch, 10))
		if len(due) != 1 || due[0].WorkspaceID != "ws_due" || !due[0].DeleteAfter.Equal(epoch.Add(-time.Hour)) {
			t.Fatalf("RetentionDue on %s = %+v, want ws_due only", name, due)
		}
	}
	lease := 5 * time.Minute
	c, ok, err := a.ClaimRetention(ctx, "ws_due", "replica-a", epoch, lease)
	if err != nil || !ok || c.Holder != "replica-a" || !c.LeaseUntil.Equal(epoch.Add(lease)) {
		t.Fatalf("first claim = %+v, %v, %v; want replica-a's until %s", c, ok, err, epoch.Add(lease))
	}
	if _, ok, err := b.ClaimRetention(ctx, "ws_due", "replica-b", epoch.Add(time.Minute), lease); err != nil || ok {
		t.Fatalf("claim of a held workspace by another holder = %v, %v; want refused", ok, err)
	}
	if _, ok, _ := a.ClaimRetention(ctx, "ws_due", "replica-a", epoch.Add(time.Minute), lease); !ok {
		t.Fatal("the holder could not renew its own claim")
	}
	// The holder records an attempt and a backoff; the holder lets go.
	c.Attempts, c.Launched, c.LastError, c.Holder = 1, true, "provider said no", ""
	c.NotBefore, c.LeaseUntil = epoch.Add(time.Hour), time.Time{}
	wantKind(t, "SaveRetentionClaim by a non-holder", b.SaveRetentionClaim(ctx, "replica-b", core.RetentionClaim{WorkspaceID: "ws_due", Holder: "replica-b"}), core.KindConflict)
	must(0, a.SaveRetentionClaim(ctx, "replica-a", c))
	if due := must(b.RetentionDue(ctx, "acc", epoch.Add(30*time.Minute), 10)); len(due) != 0 {
		t.Errorf("a workspace in backoff is listed as due: %+v", due)
	}
	if _, ok, _ := b.ClaimRetention(ctx, "ws_due", "replica-b", epoch.Add(30*time.Minute), lease); ok {
		t.Error("a claim was taken during its backoff")
	}
	c2, ok, err := b.ClaimRetention(ctx, "ws_due", "replica-b", epoch.Add(time.Hour), lease)
	if err != nil || !ok || c2.Attempts != 1 || !c2.Launched || c2.LastError != "provider said no" {
		t.Fatalf("claim after the backoff = %+v, %v, %v; want replica-b's, keeping attempts and error", c2, ok, err)
	}
	// replica-b dies holding it: after the lease, a takes over.
	if _, ok, _ := a.ClaimRetention(ctx, "ws_due", "replica-a", epoch.Add(time.Hour+time.Minute), lease); ok {
		t.Error("a live lease was taken over")
	}
	if _, ok, _ := a.ClaimRetention(ctx, "ws_due", "replica-a", epoch.Add(time.Hour+lease), lease); !ok {
		t.Error("a lapsed lease was not taken over")
	}

	// Many claimants at once over both handles: exactly one wins.
	dueWorkspace(t, a, "ws_race", "acc", epoch.Add(-time.Minute))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins []string
	)
	for i := range 16 {
		s, holder := a, "a"
		if i%2 == 1 {
			s, holder = b, "b"
		}
		holder += string(rune('0' + i%10))
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ok, err := s.ClaimRetention(ctx, "ws_race", holder+"-"+time.Duration(i).String(), epoch, lease)
			if err != nil {
				t.Errorf("concurrent claim: %v", err)
			}
			if ok {
				mu.Lock()
				wins = append(wins, holder)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(wins) != 1 {
		t.Errorf("%d concurrent claimants won the same claim (%v), want exactly 1", len(wins), wins)
	}
	_, _, err = a.ClaimRetention(ctx, "ws_race", "", epoch, lease)
	wantKind(t, "claim without holder", err, core.KindInvalid)

	// Sweep forgets the claims of workspaces no longer scheduled.
	ws := must(a.GetWorkspace(ctx, "ws_race"))
	ws.DeleteAfter = time.Time{}
	must(a.SaveWorkspace(ctx, ws))
	must(a.SweepRetention(ctx, "", 100))
	if _, ok, _ := b.ClaimRetention(ctx, "ws_race", "fresh", epoch, lease); !ok {
		t.Error("the claim of an unscheduled workspace survived the sweep")
	}
	must(0, a.DropRetentionClaim(ctx, "ws_due"))
	if _, ok, _ := b.ClaimRetention(ctx, "ws_due", "replica-b", epoch, lease); !ok {
		t.Error("a dropped claim could not be taken")
	}
}

func retentionPoliciesAndWarnings(t *testing.T, e Engine) {
	ctx := context.Background()
	s, reopen, _ := open(t, e)
	price := 0.25
	p := core.RetentionPolicy{AccountID: "acc", Enabled: true, PausedFor: 72 * time.Hour, WarnBefore: 24 * time.Hour, StoragePricePerGiBMonth: &price, UpdatedAt: epoch}
	wantKind(t, "policy of an unknown account", s.PutRetentionPolicy(ctx, p), core.KindNotFound)
	must(0, s.PutAccount(ctx, core.Account{ID: "acc", Provider: "docker", Label: "d", CreatedAt: epoch}))
	must(0, s.PutRetentionPolicy(ctx, p))
	if got := must(reopen().RetentionPolicies(ctx)); len(got) != 1 || !reflect.DeepEqual(got[0], p) {
		t.Fatalf("RetentionPolicies = %+v, want %+v", got, p)
	}
	if got, ok, err := reopen().RetentionPolicy(ctx, "acc"); err != nil || !ok || !reflect.DeepEqual(got, p) {
		t.Fatalf("RetentionPolicy(acc) = %+v, %v, %v; want %+v", got, ok, err, p)
	}
	if got, ok, err := s.RetentionPolicy(ctx, "other"); err != nil || ok {
		t.Fatalf("RetentionPolicy of an account without one = %+v, %v, %v; want none", got, ok, err)
	}
	p.StoragePricePerGiBMonth, p.Enabled = nil, false
	must(0, s.PutRetentionPolicy(ctx, p))
	if got := must(s.RetentionPolicies(ctx)); len(got) != 1 || !reflect.DeepEqual(got[0], p) {
		t.Fatalf("replaced policy = %+v, want %+v", got, p)
	}
	if got, ok, err := s.RetentionPolicy(ctx, "acc"); err != nil || !ok || !reflect.DeepEqual(got, p) {
		t.Fatalf("replaced RetentionPolicy(acc) = %+v, %v, %v; want %+v", got, ok, err, p)
	}
	dueWorkspace(t, s, "ws_1", "acc", epoch.Add(time.Hour))
	dueWorkspace(t, s, "ws_2", "acc", epoch.Add(3*time.Hour))
	if got := must(s.RetentionUnwarned(ctx, "acc", epoch.Add(2*time.Hour), 10)); len(got) != 1 || got[0].WorkspaceID != "ws_1" {
		t.Fatalf("RetentionUnwarned = %+v, want ws_1", got)
	}
	must(0, s.MarkRetentionWarned(ctx, "ws_1", epoch.Add(time.Hour)))
	if got := must(s.RetentionUnwarned(ctx, "acc", epoch.Add(4*time.Hour), 10)); len(got) != 1 || got[0].WorkspaceID != "ws_2" {
		t.Fatalf("after warning ws_1, RetentionUnwarned = %+v, want ws_2", got)
	}
	// A new delete_after makes a new warning due.
	dueWorkspace(t, s, "ws_1", "acc", epoch.Add(2*time.Hour))
	if got := must(s.RetentionUnwarned(ctx, "acc", epoch.Add(2*time.Hour), 10)); len(got) != 1 || got[0].WorkspaceID != "ws_1" {
		t.Fatalf("after rescheduling ws_1, RetentionUnwarned = %+v, want ws_1", got)
	}
	if next := must(s.SweepRetention(ctx, "", 100)); next != "ws_1" {
		t.Errorf("sweep went up to %q, want ws_1", next)
	}
	if next := must(s.SweepRetention(ctx, "ws_1", 100)); next != "" {
		t.Errorf("sweep after the last warning = %q, want \"\"", next)
	}
	must(0, s.DeleteAccount(ctx, "acc"))
	if got := must(s.RetentionPolicies(ctx)); len(got) != 0 {
		t.Errorf("the policy outlived its account: %+v", got)
	}
	if _, ok, err := s.RetentionPolicy(ctx, "acc"); err != nil || ok {
		t.Errorf("RetentionPolicy after the account's removal: %v, %v; want none", ok, err)
	}
}

func usersSessionsTokens(t *testing.T, e Engine) {
	ctx := context.Background()
	a, reopen, _ := open(t, e)
	b := reopen() // another replica: what one writes the other sees
	alice := must(a.CreateUser(ctx, auth.User{ID: "u_alice", Issuer: "local", Subject: "alice", Name: "alice", PasswordHash: "$argon2id$x", CreatedAt: epoch}))
	if !alice.Admin {
		t.Error("the first user is not an admin")
	}
	bob := must(b.CreateUser(ctx, auth.User{ID: "u_bob", Issuer: "local", Subject: "bob", Name: "bob", CreatedAt: epoch.Add(time.Second)}))
	if bob.Admin {
		t.Error("the second user became an admin")
	}
	_, err := b.CreateUser(ctx, auth.User{ID: "u_other", Issuer: "local", Subject: "alice", Name: "alice", CreatedAt: epoch})
	wantKind(t, "duplicate user", err, core.KindConflict)
	if got := must(b.UserBySubject(ctx, "local", "alice")); !reflect.DeepEqual(got, alice) {
		t.Errorf("UserBySubject = %+v, want %+v", got, alice)
	}
	if got := must(b.ListUsers(ctx)); len(got) != 2 || got[0].ID != "u_alice" || got[1].ID != "u_bob" {
		t.Errorf("ListUsers = %+v, want alice then bob", got)
	}
	_, err = a.UserByID(ctx, "nope")
	wantKind(t, "UserByID unknown", err, core.KindNotFound)

	ss := auth.Session{IDHash: "h1", UserID: "u_alice", Method: "local", CreatedAt: epoch, LastSeenAt: epoch, ExpiresAt: epoch.Add(24 * time.Hour)}
	must(0, a.PutSession(ctx, ss))
	wantKind(t, "session of an unknown user", a.PutSession(ctx, auth.Session{IDHash: "h2", UserID: "nope", CreatedAt: epoch, LastSeenAt: epoch, ExpiresAt: epoch}), core.KindNotFound)
	gotS, gotU := must2(b.SessionUser(ctx, "h1"))
	if !reflect.DeepEqual(gotS, ss) || gotU.ID != "u_alice" || !gotU.Admin {
		t.Errorf("session read on the other handle = %+v %+v", gotS, gotU)
	}
	must(0, b.TouchSession(ctx, "h1", epoch.Add(time.Hour)))
	if gotS, _ := must2(a.SessionUser(ctx, "h1")); !gotS.LastSeenAt.Equal(epoch.Add(time.Hour)) {
		t.Errorf("touched session last seen %s", gotS.LastSeenAt)
	}
	if n := must(a.DeleteExpiredSessions(ctx, epoch.Add(2*time.Hour), epoch)); n != 0 {
		t.Errorf("pruned %d live sessions", n)
	}
	must(0, a.PutSession(ctx, auth.Session{IDHash: "h_old", UserID: "u_bob", Method: "local", CreatedAt: epoch, LastSeenAt: epoch, ExpiresAt: epoch.Add(time.Minute)}))
	if n := must(b.DeleteExpiredSessions(ctx, epoch.Add(2*time.Hour), epoch)); n != 1 {
		t.Errorf("pruned %d sessions, want the expired one", n)
	}
	must(0, a.SetPassword(ctx, "u_alice", "$argon2id$y"))
	_, _, err = b.SessionUser(ctx, "h1")
	wantKind(t, "session after a password change", err, core.KindNotFound)
	must(0, a.DeleteSession(ctx, "never"))
	wantKind(t, "SetPassword unknown", a.SetPassword(ctx, "nope", "x"), core.KindNotFound)

	tk := auth.Token{ID: "tok_1", Hash: "th1", UserID: "u_bob", Label: "ci", Scope: auth.ScopeMetrics, CreatedAt: epoch, ExpiresAt: epoch.Add(720 * time.Hour)}
	must(0, a.PutToken(ctx, tk))
	wantKind(t, "token of an unknown user", a.PutToken(ctx, auth.Token{ID: "tok_x", Hash: "thx", UserID: "nope", CreatedAt: epoch}), core.KindNotFound)
	gotT, gotU := must2(b.TokenUser(ctx, "th1"))
	if !reflect.DeepEqual(gotT, tk) || gotU.ID != "u_bob" {
		t.Errorf("TokenUser = %+v %+v, want %+v of bob", gotT, gotU, tk)
	}
	must(0, b.TouchToken(ctx, "tok_1", epoch.Add(time.Minute)))
	list := must(a.ListTokens(ctx, "u_bob"))
	if len(list) != 1 || !list[0].LastUsedAt.Equal(epoch.Add(time.Minute)) || list[0].Hash != "" || list[0].Scope != auth.ScopeMetrics {
		t.Errorf("ListTokens = %+v", list)
	}
	if list := must(a.ListTokens(ctx, "u_alice")); list == nil || len(list) != 0 {
		t.Errorf("ListTokens of a user without tokens = %#v, want empty", list)
	}
	wantKind(t, "revoke another user's token", a.DeleteToken(ctx, "u_alice", "tok_1"), core.KindNotFound)
	must(0, a.DeleteToken(ctx, "u_bob", "tok_1"))
	_, _, err = b.TokenUser(ctx, "th1")
	wantKind(t, "revoked token", err, core.KindNotFound)

	// Deleting a user takes their sessions and tokens.
	must(0, a.PutSession(ctx, auth.Session{IDHash: "hb", UserID: "u_bob", Method: "local", CreatedAt: epoch, LastSeenAt: epoch, ExpiresAt: epoch.Add(time.Hour)}))
	must(0, a.PutToken(ctx, auth.Token{ID: "tok_2", Hash: "th2", UserID: "u_bob", CreatedAt: epoch}))
	must(0, b.DeleteUser(ctx, "u_bob"))
	_, _, err = a.SessionUser(ctx, "hb")
	wantKind(t, "session of a deleted user", err, core.KindNotFound)
	_, _, err = a.TokenUser(ctx, "th2")
	wantKind(t, "token of a deleted user", err, core.KindNotFound)
	wantKind(t, "DeleteUser unknown", a.DeleteUser(ctx, "u_bob"), core.KindNotFound)
}

func must2[A, B any](x A, y B, err error) (A, B) {
	if err != nil {
		panic("unexpected error: " + err.Error())
	}
	return x, y
}

func restores(t *testing.T, e Engine) {
	ctx := context.Background()
	s, reopen, _ := open(t, e)
	wantKind(t, "PutRestore empty", s.PutRestore(ctx, core.RestoreRecord{}), core.KindInvalid)
	_, err := s.GetRestore(ctx, "nope")
	wantKind(t, "GetRestore unknown", err, core.KindNotFound)
	r := core.RestoreRecord{WorkspaceID: "ws_r", ExportID: "exp_1", CreatedAt: epoch}
	must(0, s.PutRestore(ctx, r))
	r2 := r
	r2.ExportID, r2.CreatedAt = "exp_2", epoch.Add(time.Hour)
	must(0, s.PutRestore(ctx, r2))
	want := r
	want.ExportID = "exp_2" // the first time stays
	if got := must(reopen().GetRestore(ctx, "ws_r")); !reflect.DeepEqual(got, want) {
		t.Errorf("GetRestore = %+v, want %+v", got, want)
	}
}

func accountSettings(t *testing.T, e Engine) {
	ctx := context.Background()
	s, reopen, _ := open(t, e)
	in := core.Account{ID: "acc_s", Owner: "u_1", Provider: "docker", Label: "shared docker", Shared: true, DeleteExport: core.DeleteExportBestEffort, CreatedAt: epoch}
	must(0, s.PutAccount(ctx, in))
	if got := must(reopen().GetAccount(ctx, "acc_s")); !reflect.DeepEqual(got, in) {
		t.Errorf("GetAccount = %+v, want %+v", got, in)
	}
	in.Shared, in.DeleteExport = false, ""
	must(0, s.PutAccount(ctx, in))
	if got := must(s.GetAccount(ctx, "acc_s")); !reflect.DeepEqual(got, in) {
		t.Errorf("after clearing the settings GetAccount = %+v, want %+v", got, in)
	}
}

func deleteJournalPayload(t *testing.T, e Engine) {
	ctx := context.Background()
	s, reopen, _ := open(t, e)
	op := must(s.PutOp(ctx, core.Op{WorkspaceID: "ws_d", Kind: core.OpDelete, Step: "export", CreatedAt: epoch, UpdatedAt: epoch,
		Delete: &core.DeleteJournal{State: core.StatePaused, BoxID: "box-1", LastActivityAt: epoch.Add(-time.Hour), AskedAt: epoch,
			Actor: "retention", Mode: core.DeleteExportRequired, ExportID: "exp_9", Verified: true, ExportSHA256: "ab", Note: "n"}}))
	ops := must(reopen().PendingOps(ctx))
	if len(ops) != 1 || ops[0].Delete == nil || ops[0].ID != op.ID {
		t.Fatalf("PendingOps = %+v, want the delete with its journal", ops)
	}
	if !reflect.DeepEqual(*ops[0].Delete, *op.Delete) {
		t.Errorf("delete journal came back as %+v, want %+v", *ops[0].Delete, *op.Delete)
	}
	op.Delete = nil
	must(s.PutOp(ctx, op))
	if ops := must(s.PendingOps(ctx)); len(ops) != 1 || ops[0].Delete != nil {
		t.Errorf("a cleared delete journal came back: %+v", ops)
	}
}
