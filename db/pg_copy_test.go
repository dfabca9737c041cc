package db_test

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/db/storetest"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"
	"github.com/canvasapp/companion/webhooks"
)

// populate writes a row to every table of s.
func populate(t *testing.T, s storetest.Store) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(s.PutAccount(ctx, core.Account{ID: "acc_1", Owner: "u", Provider: "docker", Label: "L", Credentials: []string{"token"}, CreatedAt: at}))
	check(s.SetAccountFlag(ctx, "acc_1", &core.AccountFlag{Code: "c", Message: "m", Since: at}))
	_, err := s.SaveWorkspace(ctx, storetest.FullWorkspace("ws_a"))
	check(err)
	gone := storetest.FullWorkspace("ws_gone")
	gone.Removed = true
	_, err = s.SaveWorkspace(ctx, gone)
	check(err)
	check(s.PutPlan(ctx, core.DeletePlan{TokenHash: "h", WorkspaceID: "ws_a", State: core.StatePaused, CreatedAt: at, ExpiresAt: at.Add(100 * 365 * 24 * time.Hour)}))
	_, err = s.PutOp(ctx, core.Op{WorkspaceID: "ws_a", Kind: core.OpDelete, Step: "export", CreatedAt: at, UpdatedAt: at,
		Delete: &core.DeleteJournal{State: core.StatePaused, BoxID: "b", ExportID: "exp", Verified: true}})
	check(err)
	check(s.PutModulePin(ctx, "mod", "abc", []byte(`{"name":"mod"}`)))
	_, err = s.AppendAudit(ctx, core.AuditEntry{At: at, Owner: "u", Actor: "user:u", Action: "pause", WorkspaceID: "ws_a", Outcome: "ok"})
	check(err)
	check(s.PutExport(ctx, core.ExportRecord{ID: "exp", WorkspaceID: "ws_a", Owner: "u", CreatedAt: at, UpdatedAt: at, State: core.ExportVerified,
		Verified: true, Dir: "/d", Files: []core.ExportFile{{Name: "h.zip", Kind: "history", Bytes: 1, SHA256: "x"}}, Bytes: 1}))
	check(s.PutSealedSecret(ctx, "k", "key1", []byte{0, 1, 2, 255}))
	check(s.PutRestore(ctx, core.RestoreRecord{WorkspaceID: "ws_a", ExportID: "exp", CreatedAt: at}))
	price := 0.5
	check(s.PutRetentionPolicy(ctx, core.RetentionPolicy{AccountID: "acc_1", Enabled: true, PausedFor: time.Hour, WarnBefore: time.Minute, StoragePricePerGiBMonth: &price, UpdatedAt: at}))
	_, ok, err := s.ClaimRetention(ctx, "ws_a", "replica", at, time.Minute)
	check(err)
	if !ok {
		t.Fatal("populate: retention claim not taken")
	}
	check(s.MarkRetentionWarned(ctx, "ws_a", at))
	_, err = s.CreateUser(ctx, auth.User{ID: "u", Issuer: "local", Subject: "alice", Name: "alice", PasswordHash: "$argon2id$h", CreatedAt: at})
	check(err)
	check(s.PutSession(ctx, auth.Session{IDHash: "sh", UserID: "u", Method: "local", CreatedAt: at, LastSeenAt: at, ExpiresAt: at.Add(time.Hour)}))
	check(s.PutToken(ctx, auth.Token{ID: "tok", Hash: "th", UserID: "u", Label: "ci", Scope: auth.ScopeMetrics, CreatedAt: at}))
	check(s.AddLoginFailure(ctx, at, []auth.FailureKey{{Key: "ua|alice|6.6.6.6", Window: 100 * 365 * 24 * time.Hour}}))
	check(s.LoginSucceeded(ctx, at, "none", "alice|10.0.0.1", at.Add(100*365*24*time.Hour)))
	check(s.PutWebhook(ctx, webhooks.Hook{ID: "wh_1", Owner: "u", URL: "https://example.com/h", Events: []string{core.EventDeleteDone}, CreatedAt: at,
		PreviousSecretUntil: at.Add(24 * time.Hour)}))
	_, err = s.Enqueue(ctx, []webhooks.Delivery{{ID: "dlv_1", WebhookID: "wh_1", EventID: "evt_1", Event: core.EventDeleteDone,
		Payload: []byte(`{"id":"evt_1"}`), CreatedAt: at, NextAt: at}})
	check(err)
}

func TestCopySQLiteToPostgres(t *testing.T) {
	ctx := context.Background()
	src := openAt(t, filepath.Join(t.TempDir(), "companion.db"))
	defer src.Close()
	populate(t, src)
	url := pgtest.NewDatabase(t)
	dst, err := db.OpenPostgres(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()

	report, err := db.CopyToPostgres(ctx, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range report {
		if tc.Rows == 0 {
			t.Errorf("table %s: 0 rows copied; populate should fill every table", tc.Table)
		}
	}
	// The copy behaves as the original.
	srcID, _ := src.InstanceID(ctx)
	if id, _ := dst.InstanceID(ctx); id != srcID {
		t.Errorf("instance id %s, want %s", id, srcID)
	}
	want, _ := src.GetWorkspace(ctx, "ws_a")
	if got, err := dst.GetWorkspace(ctx, "ws_a"); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("workspace after copy = %+v, %v\nwant %+v", got, err, want)
	}
	if _, u, err := dst.SessionUser(ctx, "sh"); err != nil || u.Name != "alice" || !u.Admin {
		t.Errorf("session after copy: %+v, %v", u, err)
	}
	if tk, _, err := dst.TokenUser(ctx, "th"); err != nil || tk.Scope != auth.ScopeMetrics {
		t.Errorf("token after copy: %+v, %v; want its metrics scope kept", tk, err)
	}
	if ops, err := dst.PendingOps(ctx); err != nil || len(ops) != 1 || ops[0].Delete == nil || ops[0].Delete.ExportID != "exp" {
		t.Errorf("delete journal after copy: %+v, %v", ops, err)
	}
	if h, err := dst.Webhook(ctx, "wh_1"); err != nil || !h.PreviousSecretUntil.Equal(mustHook(t, src, "wh_1").PreviousSecretUntil) || h.PreviousSecretUntil.IsZero() {
		t.Errorf("webhook after copy: %+v, %v; want its previous secret's expiry kept", h, err)
	}
	if n, err := dst.VerifyAudit(ctx); n != 1 || err != nil {
		t.Errorf("VerifyAudit after copy = %d, %v", n, err)
	}
	saved, err := dst.SaveWorkspace(ctx, storetest.FullWorkspace("ws_new"))
	if err != nil || saved.Rev != 3 {
		t.Errorf("first save after copy: rev %d, %v; want 3", saved.Rev, err)
	}
	op, err := dst.PutOp(ctx, core.Op{WorkspaceID: "ws_new", Kind: core.OpCreate})
	if err != nil || op.ID != 2 {
		t.Errorf("first journal entry after copy: id %d, %v; want 2", op.ID, err)
	}
	// A second copy into the now populated database is refused.
	if _, err := db.CopyToPostgres(ctx, src, dst); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Errorf("copy into a populated database: %v", err)
	}
}

func TestVerifyCopyNoticesADifference(t *testing.T) {
	ctx := context.Background()
	src := openAt(t, filepath.Join(t.TempDir(), "companion.db"))
	defer src.Close()
	populate(t, src)
	url := pgtest.NewDatabase(t)
	dst, err := db.OpenPostgres(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if _, err := db.CopyToPostgres(ctx, src, dst); err != nil {
		t.Fatal(err)
	}
	pgExec(t, url, `UPDATE secrets SET sealed = '\x00'::bytea`)
	if _, err := db.VerifyCopy(ctx, src, dst); err == nil || !strings.Contains(err.Error(), "secrets differs") {
		t.Fatalf("VerifyCopy after tampering: %v, want a difference in secrets", err)
	}
}

func mustHook(t *testing.T, s *db.Store, id string) webhooks.Hook {
	t.Helper()
	h, err := s.Webhook(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
