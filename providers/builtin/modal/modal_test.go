package modal_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
	modalemu "github.com/canvasapp/companion/e2e/emulators/modal"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/providercontract"
	"github.com/canvasapp/companion/providers/builtin/modal"
	"github.com/canvasapp/companion/secrets"
	"google.golang.org/grpc/codes"
)

const (
	tokenID     = "ak-emulatortokenid"
	tokenSecret = "as-emulator-token-secret-value"
)

type fixture struct {
	emu  *modalemu.Server
	p    *modal.Provider
	acct core.Account
}

// newFixture starts the emulator and a provider with an account whose
// token is in the real keyring (scripts/with-keyring.sh).
func newFixture(t *testing.T, secret string) *fixture {
	t.Helper()
	k := &secrets.Keyring{Namespace: core.NewID("test")}
	testsupport.NeedKeyring(t, k)
	emu := modalemu.New(modalemu.Options{TokenID: tokenID, TokenSecret: tokenSecret,
		Clock: emulator.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	if err := emu.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Close)
	acct := core.Account{ID: core.NewID("acc"), Provider: "modal", Config: map[string]string{modal.ConfigServerURL: emu.URL()}}
	ctx := context.Background()
	for name, v := range map[string]string{modal.CredTokenID: tokenID, modal.CredTokenSecret: secret} {
		if err := k.Set(ctx, core.CredentialKey(acct.ID, name), v); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.Delete(context.Background(), core.CredentialKey(acct.ID, name)) })
	}
	p := modal.New(modal.Config{Secrets: k})
	t.Cleanup(func() { p.Close() })
	return &fixture{emu: emu, p: p, acct: acct}
}

func noSecret(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), tokenSecret) {
		t.Fatalf("error shows the token secret: %v", err)
	}
}

// TestProviderContract runs the core.Provider contract against the Modal
// emulator through the real SDK.
func TestProviderContract(t *testing.T) {
	f := newFixture(t, tokenSecret)
	providercontract.Run(t, providercontract.Subject{
		Provider:  f.p,
		Account:   f.acct,
		MissingID: "sb-AAAAAAAAAAAAAAAAAAAAAA",
		Check:     noSecret,
	})
}

// TestSnapshotResumeIdentity: a pause leaves a terminated sandbox with a
// snapshot; a resume makes a new sandbox with a new key, a retried resume
// of the old box finds it, and the old snapshot is gone.
func TestSnapshotResumeIdentity(t *testing.T) {
	f := newFixture(t, tokenSecret)
	ctx := context.Background()
	b, err := f.p.Create(ctx, f.acct, core.CreateSpec{WorkspaceID: "ws-one", Name: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Key == "" || b.State != core.StateRunning {
		t.Fatalf("created %+v", b)
	}
	ep, err := f.p.Endpoint(ctx, f.acct, b.ID)
	if err != nil || !strings.HasPrefix(ep.URL, "http://127.0.0.1:") {
		t.Fatalf("endpoint %+v %v", ep, err)
	}
	if n := f.emu.TunnelRequests(b.ID); n != 0 {
		t.Fatalf("%d requests through the tunnel from create, get and endpoint; want none", n)
	}
	paused, err := f.p.Suspend(ctx, f.acct, b.ID)
	if err != nil || paused.State != core.StatePaused || paused.ID != b.ID {
		t.Fatalf("suspend: %+v %v", paused, err)
	}
	sb, _ := f.emu.Sandbox(b.ID)
	snap := sb.Tags[modal.TagSnapshot]
	if sb.State != modalemu.StateTerminated || snap == "" {
		t.Fatalf("after suspend the sandbox is %s with snapshot %q", sb.State, snap)
	}
	r, err := f.p.Resume(ctx, f.acct, b.ID)
	if err != nil || r.ID == b.ID || r.Key == b.Key || r.Key == "" || r.Labels[core.LabelWorkspace] != "ws-one" {
		t.Fatalf("resume: %+v %v; want a new id and key for the same workspace", r, err)
	}
	again, err := f.p.Resume(ctx, f.acct, b.ID)
	if err != nil || again.ID != r.ID {
		t.Fatalf("resume retried on the old box: %+v %v; want %s again", again, err, r.ID)
	}
	if im, _ := f.emu.Image(snap); !im.Deleted {
		t.Fatal("the snapshot resumed from is still there")
	}
	if n := len(f.emu.Sandboxes()); n != 2 {
		t.Fatalf("%d sandboxes, want 2 (the old and the new)", n)
	}
	// Modal's own idle timeout terminates the new one; no snapshot: gone.
	f.emu.Clock().Advance(modal.DefaultIdleTimeout + time.Second)
	g, err := f.p.Get(ctx, f.acct, r.ID)
	if err != nil || g.State != core.StateDeleted {
		t.Fatalf("after the idle timeout: %+v %v; want deleted", g, err)
	}
}

// TestSnapshotExpiry: a paused box whose snapshot's TTL ran out is
// deleted, and resuming it says so.
func TestSnapshotExpiry(t *testing.T) {
	f := newFixture(t, tokenSecret)
	ctx := context.Background()
	b, err := f.p.Create(ctx, f.acct, core.CreateSpec{WorkspaceID: "ws-exp"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.p.Suspend(ctx, f.acct, b.ID); err != nil {
		t.Fatal(err)
	}
	f.emu.Clock().Advance(modal.SnapshotTTL + time.Minute)
	g, err := f.p.Get(ctx, f.acct, b.ID)
	if err != nil || g.State != core.StateDeleted {
		t.Fatalf("after the snapshot expired: %+v %v", g, err)
	}
	_, err = f.p.Resume(ctx, f.acct, b.ID)
	if !core.IsKind(err, core.KindNotFound) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("resume after expiry: %v", err)
	}
}

// TestErrors: a wrong token, Unavailable, ResourceExhausted and huge
// messages become clear kinds; nothing shows the secret.
func TestErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("wrong token", func(t *testing.T) {
		f := newFixture(t, "as-not-the-secret")
		_, err := f.p.List(ctx, f.acct)
		if !core.IsKind(err, core.KindUnauthorized) || strings.Contains(err.Error(), "as-not-the-secret") {
			t.Fatalf("wrong token: %v (%s)", err, core.KindOf(err))
		}
	})
	f := newFixture(t, tokenSecret)
	cases := []struct {
		code codes.Code
		msg  string
		kind core.ErrorKind
	}{
		{codes.Unavailable, "down for maintenance", core.KindUnavailable},
		{codes.ResourceExhausted, "slow down", core.KindRateLimited},
		{codes.PermissionDenied, strings.Repeat("x", 1<<20), core.KindUnauthorized},
		{codes.Internal, "boom " + tokenSecret, core.KindInternal},
	}
	for _, c := range cases {
		f.emu.AddFault(&modalemu.Fault{Method: "SandboxList", Code: c.code, Message: c.msg, Count: -1})
		_, err := f.p.List(ctx, f.acct)
		if !core.IsKind(err, c.kind) {
			t.Errorf("%s: %v (%s), want %s", c.code, err, core.KindOf(err), c.kind)
		}
		if err != nil && (len(err.Error()) > 1000 || strings.Contains(err.Error(), tokenSecret)) {
			t.Errorf("%s: message of %d bytes, or with the secret", c.code, len(err.Error()))
		}
		f.emu.ClearFaults()
	}
	f.emu.AddFault(&modalemu.Fault{Method: "SandboxList", Code: codes.ResourceExhausted, Message: "slow down", RetryAfter: 7 * time.Second, Count: 1})
	if _, err := f.p.List(ctx, f.acct); !core.IsKind(err, core.KindRateLimited) || core.RetryAfterOf(err) != 7*time.Second {
		t.Errorf("throttled with a retry policy: %v (%s), retry after %s; want rate_limited after 7s", err, core.KindOf(err), core.RetryAfterOf(err))
	}
	f.emu.AddFault(&modalemu.Fault{Method: "SandboxList", Code: codes.DeadlineExceeded, Message: "too slow", Count: -1})
	if _, err := f.p.List(ctx, f.acct); !core.IsKind(err, core.KindUnavailable) || !strings.Contains(err.Error(), "in time") {
		t.Errorf("deadline exceeded: %v (%s)", err, core.KindOf(err))
	}
	f.emu.ClearFaults()
	if _, err := f.p.List(ctx, f.acct); err != nil {
		t.Fatalf("after the faults: %v", err)
	}
	if _, err := f.p.Get(ctx, f.acct, "not-a-sandbox"); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("get of a malformed id: %v", err)
	}
}

// TestDescribe: the capabilities of a snapshot-and-recreate provider, the
// two credentials, every field with its help, and the snapshot clock.
func TestDescribe(t *testing.T) {
	info, err := modal.New(modal.Config{}).Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := core.Capabilities{List: true, Suspend: true, SuspendKeepsFiles: true, Delete: true, NativePausedTTL: true}
	if info.Capabilities != want || info.Name != "modal" || info.Kind != "builtin" || !info.ProviderSessionKey {
		t.Errorf("describe: %+v", info)
	}
	if missing := info.UndescribedFields(); len(missing) != 0 || len(info.Config) == 0 || len(info.Options) == 0 {
		t.Errorf("fields without help: %v", missing)
	}
	if len(info.Credentials) != 2 || info.Credentials[0].Name != modal.CredTokenID || info.Credentials[1].Name != modal.CredTokenSecret {
		t.Errorf("credentials: %+v", info.Credentials)
	}
	if len(info.Clocks) != 2 ||
		info.Clocks[0].Name != "lifetime" || info.Clocks[0].After != modal.Lifetime || info.Clocks[0].Starts != core.ClockStartsRunning ||
		info.Clocks[1].Name != "snapshot_expiry" || info.Clocks[1].After != modal.SnapshotTTL || info.Clocks[1].Starts != core.ClockStartsPaused ||
		info.Clocks[0].Loses != core.ClockLosesBox || info.Clocks[1].Loses != core.ClockLosesBox {
		t.Errorf("clocks: %+v", info.Clocks)
	}
}

// TestSettingsRefused: a server URL in plain http off loopback, and an
// idle timeout that is no duration, are refused with the reason, before
// anything is made.
func TestSettingsRefused(t *testing.T) {
	f := newFixture(t, tokenSecret)
	ctx := context.Background()
	for name, cfg := range map[string]map[string]string{
		"remote http": {modal.ConfigServerURL: "http://api.example.com"},
		"odd scheme":  {modal.ConfigServerURL: "grpc://127.0.0.1:1"},
		"idle":        {modal.ConfigServerURL: f.emu.URL(), modal.ConfigIdleTimeout: "soon"},
	} {
		acct := f.acct
		acct.Config = cfg
		_, err := f.p.Create(ctx, acct, core.CreateSpec{WorkspaceID: "ws-" + strings.ReplaceAll(name, " ", "-")})
		if !core.IsKind(err, core.KindInvalid) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
	if n := len(f.emu.Sandboxes()); n != 0 {
		t.Fatalf("%d sandboxes made from refused settings", n)
	}
}

// TestMemorySnapshot: with memory_snapshot on, a pause also takes a
// memory snapshot and a resume restores it (the processes, so the same
// agent-server key, in a new sandbox named after the old one, which a
// retried resume finds); once the memory snapshot is past its 7 days, a
// resume falls back to the filesystem snapshot with a new key.
func TestMemorySnapshot(t *testing.T) {
	f := newFixture(t, tokenSecret)
	f.acct.Config[modal.ConfigMemory] = "true"
	ctx := context.Background()
	b, err := f.p.Create(ctx, f.acct, core.CreateSpec{WorkspaceID: "ws-mem"})
	if err != nil {
		t.Fatal(err)
	}
	if sb, _ := f.emu.Sandbox(b.ID); !sb.EnableSnapshot {
		t.Fatal("created without memory snapshots")
	}
	if _, err := f.p.Suspend(ctx, f.acct, b.ID); err != nil {
		t.Fatal(err)
	}
	if sb, _ := f.emu.Sandbox(b.ID); sb.Tags[modal.TagMemorySnapshot] == "" || sb.Tags[modal.TagSnapshot] == "" {
		t.Fatalf("tags after a pause: %v", sb.Tags)
	}
	// The first resume restores, then fails to tag the new sandbox (as
	// if companion died there); the retry finds the restore by its name.
	f.emu.AddFault(&modalemu.Fault{Method: "SandboxTagsSet", Code: codes.FailedPrecondition, Message: "not now", Count: 1})
	if _, err := f.p.Resume(ctx, f.acct, b.ID); err == nil {
		t.Fatal("resume with its tagging refused succeeded")
	}
	r, err := f.p.Resume(ctx, f.acct, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, x := range f.emu.Sandboxes() {
		if x.State == modalemu.StateRunning {
			running++
		}
	}
	if running != 1 {
		t.Fatalf("%d running sandboxes after a retried memory resume, want 1", running)
	}
	sb, _ := f.emu.Sandbox(r.ID)
	if r.ID == b.ID || sb.RestoredFrom != b.ID || r.Key != b.Key || r.Labels[core.LabelWorkspace] != "ws-mem" {
		t.Fatalf("memory resume: %+v (restored from %q); want a new sandbox from %s with the same key", r, sb.RestoredFrom, b.ID)
	}
	if again, err := f.p.Resume(ctx, f.acct, b.ID); err != nil || again.ID != r.ID {
		t.Fatalf("retried resume: %+v %v", again, err)
	}

	if _, err := f.p.Suspend(ctx, f.acct, r.ID); err != nil {
		t.Fatal(err)
	}
	f.emu.Clock().Advance(modalemu.MemorySnapshotTTL + time.Hour)
	r2, err := f.p.Resume(ctx, f.acct, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sb, _ := f.emu.Sandbox(r2.ID); sb.RestoredFrom != "" || r2.Key == r.Key || r2.State != core.StateRunning {
		t.Fatalf("resume after the memory snapshot expired: %+v (restored from %q); want a fresh sandbox from the filesystem snapshot", r2, sb.RestoredFrom)
	}
}
