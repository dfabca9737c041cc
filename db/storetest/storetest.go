// Package storetest is the one table of store test cases that both of
// companion's storage engines run (SQLite in package db's tests,
// PostgreSQL in db's pg tests), so the two cannot drift apart. A case
// takes a fresh store from the engine and checks a guarantee that core
// relies on; engine-specific behaviour (file modes, WAL, connection URLs)
// stays in the engine's own tests.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/webhooks"
)

// Store is everything both engines implement.
type Store interface {
	core.Store
	core.AuditLog
	core.ExportStore
	core.RetentionStore
	core.RestoreStore
	auth.Store
	webhooks.Store
	SaveWorkspaces(ctx context.Context, list []core.Workspace) error
	VerifyAudit(ctx context.Context) (int, error)
	PutModulePin(ctx context.Context, name, sha256 string, manifest []byte) error
	ModulePin(ctx context.Context, name string) (sha256 string, manifest []byte, err error)
	ListModulePins(ctx context.Context) ([]string, error)
	DeleteModulePin(ctx context.Context, name string) error
	SealedSecret(ctx context.Context, key string) (keyID string, sealed []byte, err error)
	PutSealedSecret(ctx context.Context, key, keyID string, sealed []byte) error
	DeleteSealedSecret(ctx context.Context, key string) error
	CountSealedSecrets(ctx context.Context) (int, error)
	ResealSecrets(ctx context.Context, reseal func(key, keyID string, sealed []byte) (string, []byte, error)) (int, error)
	Close() error
}

// Engine makes stores for the cases.
type Engine struct {
	// Open returns a new, empty store whose clock is now, closed when t
	// ends, and a function that opens the same database again (as a
	// restart or a second replica would), also closed when t ends.
	Open func(t testing.TB, now func() time.Time) (s Store, reopen func() Store)
	// LogsRevisions says Changes returns every recent revision, not only
	// the latest of each workspace (see core.Store.Changes).
	LogsRevisions bool
}

// revs lists changes as "id@rev" ("-" marks a tombstone), for comparing.
func revs(changes []core.Workspace) string {
	var b strings.Builder
	for i, ws := range changes {
		if i > 0 {
			b.WriteByte(' ')
		}
		if ws.Removed {
			b.WriteByte('-')
		}
		fmt.Fprintf(&b, "%s@%d", ws.ID, ws.Rev)
	}
	return b.String()
}

// pick is logged on an engine that logs revisions, else coalesced.
func pick(e Engine, logged, coalesced string) string {
	if e.LogsRevisions {
		return logged
	}
	return coalesced
}

// Cases are the shared cases by name.
var Cases = map[string]func(t *testing.T, e Engine){
	"WorkspaceRoundTrip":    workspaceRoundTrip,
	"UnknownIDs":            unknownIDs,
	"InvalidInput":          invalidInput,
	"ChangesAndTombstones":  changesAndTombstones,
	"PruneTombstones":       pruneTombstones,
	"ConcurrentRevisions":   concurrentRevisions,
	"AccountsAndFlags":      accountsAndFlags,
	"Journal":               journal,
	"PlansSingleUse":        plansSingleUse,
	"AuditChain":            auditChain,
	"Exports":               exports,
	"ExportsToExpire":       exportsToExpire,
	"UnfinishedExports":     unfinishedExports,
	"ModulePins":            modulePins,
	"SealedSecrets":         sealedSecrets,
	"ReopenKeepsEverything": reopenKeepsEverything,
	"CancelledSaveNoGap":    cancelledSaveNoGap,
	"FeedAcrossRestart":     feedAcrossRestart,
}

// Run runs every case against e, each as a subtest.
func Run(t *testing.T, e Engine) {
	for name, c := range Cases {
		t.Run(name, func(t *testing.T) { c(t, e) })
	}
}

var epoch = time.Date(2025, 6, 1, 12, 0, 0, 42, time.UTC)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

func open(t *testing.T, e Engine) (Store, func() Store, *clock) {
	c := &clock{t: epoch}
	s, reopen := e.Open(t, c.now)
	return s, reopen, c
}

// FullWorkspace is a workspace with every field set.
func FullWorkspace(id string) core.Workspace {
	at := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC)
	code := 137
	return core.Workspace{
		ID: id, Owner: "user_7", Name: "feature branch ✓", AccountID: "acc_1", Provider: "docker",
		State: core.StatePaused, BoxID: "box-123", BoxURL: "http://127.0.0.1:43123", Adopted: true,
		Lifecycle:      core.Lifecycle{IdlePauseAfter: 15 * time.Minute, PausedTTL: 7 * 24 * time.Hour},
		Options:        map[string]string{"image": "agent:latest", "quote": `"x"`},
		PausedAt:       at.Add(time.Hour),
		LastActivityAt: at.Add(30 * time.Minute),
		Size:           &core.Size{Bytes: 1 << 40, Source: core.SizeDockerEngineUsed, At: at.Add(2 * time.Hour)},
		Keep:           true, DeleteAfter: at.Add(30 * 24 * time.Hour), Error: "resume failed: rate limited",
		CreatedAt: at, StopReason: core.StopReason("exited"), ExitCode: &code,
	}
}

// must returns v, or panics on err: a case stops at its first failed call
// (the panic names the call's line in its stack).
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("unexpected error: %v", err))
	}
	return v
}

func wantKind(t *testing.T, what string, err error, kind core.ErrorKind) {
	t.Helper()
	if !core.IsKind(err, kind) {
		t.Errorf("%s: error = %v (kind %q), want kind %q", what, err, core.KindOf(err), kind)
	}
}

func workspaceRoundTrip(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _, _ := open(t, e)
	in := FullWorkspace("ws_full")
	saved := must(s.SaveWorkspace(ctx, in))
	want := in
	want.Rev, want.UpdatedAt = saved.Rev, epoch
	if !reflect.DeepEqual(saved, want) {
		t.Fatalf("SaveWorkspace returned\n%+v\nwant\n%+v", saved, want)
	}
	if saved.Rev != 1 {
		t.Errorf("first revision = %d, want 1", saved.Rev)
	}
	if got := must(s.GetWorkspace(ctx, "ws_full")); !reflect.DeepEqual(got, want) {
		t.Fatalf("GetWorkspace =\n%+v\nwant\n%+v", got, want)
	}
	zero := core.Workspace{ID: "ws_zero", Name: "z", AccountID: "a", Provider: "p", State: core.StateRunning}
	got := must(s.SaveWorkspace(ctx, zero))
	zero.Rev, zero.UpdatedAt = got.Rev, epoch
	if back := must(s.GetWorkspace(ctx, "ws_zero")); !reflect.DeepEqual(back, zero) {
		t.Fatalf("zero workspace came back as\n%+v\nwant\n%+v", back, zero)
	}
	list := must(s.ListWorkspaces(ctx))
	if len(list) != 2 || list[0].ID != "ws_full" || list[1].ID != "ws_zero" {
		t.Fatalf("ListWorkspaces = %+v, want ws_full then ws_zero", list)
	}
}

func unknownIDs(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _, _ := open(t, e)
	_, err := s.GetWorkspace(ctx, "nope")
	wantKind(t, "GetWorkspace", err, core.KindNotFound)
	_, err = s.GetAccount(ctx, "nope")
	wantKind(t, "GetAccount", err, core.KindNotFound)
	wantKind(t, "DeleteAccount", s.DeleteAccount(ctx, "nope"), core.KindNotFound)
	wantKind(t, "SetAccountFlag", s.SetAccountFlag(ctx, "nope", &core.AccountFlag{Code: "x", Since: epoch}), core.KindNotFound)
	wantKind(t, "DeleteOp", s.DeleteOp(ctx, 999), core.KindNotFound)
	_, err = s.PutOp(ctx, core.Op{ID: 999, WorkspaceID: "w", Kind: core.OpPause})
	wantKind(t, "PutOp update", err, core.KindNotFound)
	wantKind(t, "PutPlan", s.PutPlan(ctx, core.DeletePlan{TokenHash: "h", WorkspaceID: "nope", ExpiresAt: epoch.Add(time.Hour)}), core.KindNotFound)
	_, err = s.TakePlan(ctx, "h", "nope", epoch)
	wantKind(t, "TakePlan", err, core.KindNotFound)
	_, err = s.GetExport(ctx, "nope")
	wantKind(t, "GetExport", err, core.KindNotFound)
	_, _, err = s.ModulePin(ctx, "nope")
	wantKind(t, "ModulePin", err, core.KindNotFound)
	wantKind(t, "DeleteModulePin", s.DeleteModulePin(ctx, "nope"), core.KindNotFound)
	_, _, err = s.SealedSecret(ctx, "nope")
	wantKind(t, "SealedSecret", err, core.KindNotFound)
	wantKind(t, "DeleteSealedSecret", s.DeleteSealedSecret(ctx, "nope"), core.KindNotFound)
}

func invalidInput(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _, _ := open(t, e)
	_, err := s.SaveWorkspace(ctx, core.Workspace{})
	wantKind(t, "SaveWorkspace without id", err, core.KindInvalid)
	far := FullWorkspace("ws_far")
	far.PausedAt = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err = s.SaveWorkspace(ctx, far)
	wantKind(t, "SaveWorkspace year 3000", err, core.KindInvalid)
	wantKind(t, "PutAccount token as credential name", s.PutAccount(ctx, core.Account{ID: "a", Provider: "p", Credentials: []string{"ghp_abc def"}}), core.KindInvalid)
	_, err = s.PutOp(ctx, core.Op{})
	wantKind(t, "PutOp empty", err, core.KindInvalid)
	wantKind(t, "PutExport verified without files", s.PutExport(ctx, core.ExportRecord{ID: "x", WorkspaceID: "w", State: core.ExportVerified, Verified: true, CreatedAt: epoch, UpdatedAt: epoch}), core.KindInvalid)
	_, err = s.AppendAudit(ctx, core.AuditEntry{At: epoch})
	wantKind(t, "AppendAudit without action", err, core.KindInvalid)
	wantKind(t, "PutSealedSecret empty", s.PutSealedSecret(ctx, "k", "", nil), core.KindInvalid)
	// Nothing of the refused input was written.
	if list := must(s.ListWorkspaces(ctx)); len(list) != 0 {
		t.Errorf("refused saves left %d workspaces", len(list))
	}
	if _, rev, _, _ := s.Changes(ctx, 0); rev != 0 {
		t.Errorf("refused saves used revisions: rev = %d", rev)
	}
}

func changesAndTombstones(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _, _ := open(t, e)
	a := must(s.SaveWorkspace(ctx, FullWorkspace("a")))
	b := must(s.SaveWorkspace(ctx, FullWorkspace("b")))
	a.Removed = true
	a = must(s.SaveWorkspace(ctx, a))
	changes, rev, complete := must3(t)(s.Changes(ctx, 0))
	if want := pick(e, "a@1 b@2 -a@3", "b@2 -a@3"); !complete || rev != 3 || revs(changes) != want {
		t.Fatalf("Changes(0) = %s, rev %d, complete %v; want %s", revs(changes), rev, complete, want)
	}
	if changes[len(changes)-1].Name != a.Name || changes[len(changes)-1].BoxID != a.BoxID {
		t.Errorf("Changes(0) ends with %+v, want the saved %+v", changes[len(changes)-1], a)
	}
	changes, _, complete = must3(t)(s.Changes(ctx, b.Rev))
	if !complete || revs(changes) != "-a@3" {
		t.Fatalf("Changes(%d) = %s, %v", b.Rev, revs(changes), complete)
	}
	if _, _, complete = must3(t)(s.Changes(ctx, 99)); complete {
		t.Errorf("Changes from the future is complete")
	}
	if list := must(s.ListWorkspaces(ctx)); len(list) != 1 || list[0].ID != "b" {
		t.Errorf("ListWorkspaces shows tombstones: %+v", list)
	}
	if got := must(s.GetWorkspace(ctx, "a")); !got.Removed {
		t.Errorf("GetWorkspace of a tombstone = %+v", got)
	}
}

func must3(t *testing.T) func(c []core.Workspace, rev int64, complete bool, err error) ([]core.Workspace, int64, bool) {
	return func(c []core.Workspace, rev int64, complete bool, err error) ([]core.Workspace, int64, bool) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return c, rev, complete
	}
}

func pruneTombstones(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _, c := open(t, e)
	for i := range 3 {
		ws := FullWorkspace(fmt.Sprintf("t%d", i))
		ws.Removed = true
		c.set(epoch.Add(time.Duration(i) * time.Hour))
		must(s.SaveWorkspace(ctx, ws))
	}
	live := must(s.SaveWorkspace(ctx, FullWorkspace("live")))
	// Cut off everything removed before epoch+90 min: t0 and t1 (revs 1, 2).
	if err := s.PruneTombstones(ctx, epoch.Add(90*time.Minute), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetWorkspace(ctx, "t1"); !core.IsKind(err, core.KindNotFound) {
		t.Errorf("pruned tombstone t1 still there: %v", err)
	}
	must(s.GetWorkspace(ctx, "t2"))
	if _, _, complete := must3(t)(s.Changes(ctx, 1)); complete {
		t.Errorf("Changes(1) is complete although revision 2 was pruned")
	}
	changes, _, complete := must3(t)(s.Changes(ctx, 2))
	if !complete || len(changes) != 2 || changes[1].ID != live.ID {
		t.Errorf("Changes(2) = %+v, %v", changes, complete)
	}
	// keep 0 prunes the rest; the live workspace stays.
	if err := s.PruneTombstones(ctx, time.Time{}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetWorkspace(ctx, "t2"); !core.IsKind(err, core.KindNotFound) {
		t.Errorf("keep=0 left t2: %v", err)
	}
	must(s.GetWorkspace(ctx, "live"))
}

func concurrentRevisions(t *testing.T, e Engine) {
	ctx := context.Background()
	s, reopen, _ := open(t, e)
	other := reopen() // a second process or replica on the same database
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := s
			if i%2 == 1 {
				st = other
			}
			_, err := st.SaveWorkspace(ctx, FullWorkspace(fmt.Sprintf("w%02d", i%10)))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	changes, rev, complete := must3(t)(s.Changes(ctx, 0))
	if want := pick(e, fmt.Sprint(n), "10"); !complete || rev != n || fmt.Sprint(len(changes)) != want {
		t.Fatalf("after %d saves: rev %d, %d changes, complete %v", n, rev, len(changes), complete)
	}
	for i := 1; i < len(changes); i++ {
		if changes[i].Rev <= changes[i-1].Rev {
			t.Fatalf("revisions out of order: %d then %d", changes[i-1].Rev, changes[i].Rev)
		}
	}
	if err := s.SaveWorkspaces(ctx, []core.Workspace{FullWorkspace("bulk1"), FullWorkspace("bulk2")}); err != nil {
		t.Fatal(err)
	}
	if _, rev, _ := must3(t)(other.Changes(ctx, 0)); rev != n+2 {
		t.Errorf("after a bulk save of 2, rev = %d, want %d", rev, n+2)
	}
}

func accountsAndFlags(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _, _ := open(t, e)
	a := core.Account{ID: "acc_1", Owner: "u", Provider: "daytona", Label: "Work",
		Config: map[string]string{"region": "eu"}, Credentials: []string{"api_key"}, CreatedAt: epoch}
	if err := s.PutAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := must(s.GetAccount(ctx, "acc_1")); !reflect.DeepEqual(got, a) {
		t.Fatalf("GetAccount = %+v, want %+v", got, a)
	}
	a.Label = "Renamed"
	if err := s.PutAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	if list := must(s.ListAccounts(ctx)); len(list) != 1 || list[0].Label != "Renamed" {
		t.Fatalf("ListAccounts = %+v", list)
	}
	// Oldest first, an account without a creation time before all, ties
	// by id in byte order.
	for _, id := range []string{"b_1", "B_2", "a_0"} {
		at := epoch
		if id == "a_0" {
			at = time.Time{}
		}
		if err := s.PutAccount(ctx, core.Account{ID: id, Provider: "docker", Label: id, CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for _, a := range must(s.ListAccounts(ctx)) {
		ids = append(ids, a.ID)
	}
	if want := []string{"a_0", "B_2", "acc_1", "b_1"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("ListAccounts order = %v, want %v", ids, want)
	}
	for _, id := range []string{"b_1", "B_2", "a_0"} {
		if err := s.DeleteAccount(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	f := core.AccountFlag{Code: "runaway", Message: "too many boxes", Since: epoch}
	if err := s.SetAccountFlag(ctx, "acc_1", &f); err != nil {
		t.Fatal(err)
	}
	if flags := must(s.AccountFlags(ctx)); !reflect.DeepEqual(flags, map[string]core.AccountFlag{"acc_1": f}) {
		t.Fatalf("AccountFlags = %+v", flags)
	}
	if err := s.SetAccountFlag(ctx, "acc_1", nil); err != nil {
		t.Fatal(err)
	}
	if flags := must(s.AccountFlags(ctx)); len(flags) != 0 {
		t.Fatalf("flag not cleared: %+v", flags)
	}
	if err := s.SetAccountFlag(ctx, "acc_1", &f); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAccount(ctx, "acc_1"); err != nil {
		t.Fatal(err)
	}
	if flags := must(s.AccountFlags(ctx)); len(flags) != 0 {
		t.Fatalf("flag outlived its account: %+v", flags)
	}
}

func journal(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _, _ := open(t, e)
	op1 := must(s.PutOp(ctx, core.Op{WorkspaceID: "w1", Kind: core.OpCreate, Step: "provider", CreatedAt: epoch, UpdatedAt: epoch}))
	op2 := must(s.PutOp(ctx, core.Op{WorkspaceID: "w2", Kind: core.OpDelete, Step: "export", CreatedAt: epoch, UpdatedAt: epoch}))
	if op1.ID == 0 || op2.ID <= op1.ID {
		t.Fatalf("ids %d, %d: want increasing, non-zero", op1.ID, op2.ID)
	}
	op1.Step, op1.Attempts, op1.LastError = "save", 2, "timeout"
	must(s.PutOp(ctx, op1))
	ops := must(s.PendingOps(ctx))
	if len(ops) != 2 || !reflect.DeepEqual(ops[0], op1) || !reflect.DeepEqual(ops[1], op2) {
		t.Fatalf("PendingOps = %+v\nwant %+v, %+v", ops, op1, op2)
	}
	if err := s.DeleteOp(ctx, op1.ID); err != nil {
		t.Fatal(err)
	}
	op3 := must(s.PutOp(ctx, core.Op{WorkspaceID: "w3", Kind: core.OpPause, CreatedAt: epoch, UpdatedAt: epoch}))
	if op3.ID <= op2.ID {
		t.Errorf("id %d reused or went back (after %d)", op3.ID, op2.ID)
	}
}

func plansSingleUse(t *testing.T, e Engine) {
	ctx := context.Background()
	s, reopen, _ := open(t, e)
	must(s.SaveWorkspace(ctx, FullWorkspace("w")))
	must(s.SaveWorkspace(ctx, FullWorkspace("other")))
	p := core.DeletePlan{TokenHash: "h1", WorkspaceID: "w", State: core.StatePaused, BoxID: "box-123",
		LastActivityAt: epoch.Add(-time.Hour), CreatedAt: epoch, ExpiresAt: epoch.Add(10 * time.Minute)}
	if err := s.PutPlan(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakePlan(ctx, "h1", "other", epoch); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("a token for another workspace: %v", err)
	}
	// Two stores race for one token: exactly one wins.
	other := reopen()
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for _, st := range []Store{s, other, s, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := st.TakePlan(ctx, "h1", "w", epoch)
			if err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
				if !reflect.DeepEqual(got, p) {
					t.Errorf("TakePlan = %+v, want %+v", got, p)
				}
			} else if !core.IsKind(err, core.KindNotFound) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d takes of one token succeeded, want 1", wins)
	}
	// Expiry.
	p.TokenHash = "h2"
	if err := s.PutPlan(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakePlan(ctx, "h2", "w", p.ExpiresAt); !core.IsKind(err, core.KindNotFound) {
		t.Errorf("an expired plan was taken: %v", err)
	}
}

func auditChain(t *testing.T, e Engine) {
	ctx := context.Background()
	s, reopen, _ := open(t, e)
	other := reopen()
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := s
			if i%2 == 1 {
				st = other
			}
			owner := "u1"
			if i%3 == 0 {
				owner = "u2"
			}
			if _, err := st.AppendAudit(ctx, core.AuditEntry{At: epoch, Owner: owner, Actor: "user:" + owner, Action: "pause", WorkspaceID: "w", Outcome: "ok"}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n, err := s.VerifyAudit(ctx); err != nil || n != 10 {
		t.Fatalf("VerifyAudit = %d, %v; want 10 entries, no break", n, err)
	}
	page := must(s.ListAudit(ctx, "u2", 0, 2))
	if len(page) != 2 || page[0].ID <= page[1].ID || page[0].Owner != "u2" {
		t.Fatalf("ListAudit(u2) = %+v", page)
	}
	rest := must(s.ListAudit(ctx, "u2", page[1].ID, 10))
	if len(rest) != 2 {
		t.Fatalf("second page = %+v, want the other 2 of u2's 4", rest)
	}
	if none := must(s.ListAudit(ctx, "nobody", 0, 10)); none == nil || len(none) != 0 {
		t.Errorf("ListAudit of nobody = %#v, want an empty list", none)
	}
}

func exports(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _, _ := open(t, e)
	run := core.ExportRecord{ID: "exp1", WorkspaceID: "w", Owner: "u", CreatedAt: epoch, UpdatedAt: epoch, State: core.ExportRunning}
	if err := s.PutExport(ctx, run); err != nil {
		t.Fatal(err)
	}
	done := run
	done.ID, done.CreatedAt = "exp2", epoch.Add(time.Minute)
	done.State, done.Verified, done.Dir, done.Bytes, done.ArchiveSHA256 = core.ExportVerified, true, "/x/exp2", 42, "ab"
	done.Files = []core.ExportFile{{Name: "history.zip", Kind: "history", Bytes: 42, SHA256: "cd"}}
	if err := s.PutExport(ctx, done); err != nil {
		t.Fatal(err)
	}
	got := must(s.GetExport(ctx, "exp2"))
	if !reflect.DeepEqual(got, done) {
		t.Fatalf("GetExport = %+v, want %+v", got, done)
	}
	failed := run
	failed.State, failed.Error, failed.UpdatedAt = core.ExportFailed, "companion restarted", epoch.Add(time.Hour)
	if err := s.PutExport(ctx, failed); err != nil {
		t.Fatal(err)
	}
	list := must(s.ListExports(ctx, "w"))
	if len(list) != 2 || list[0].ID != "exp2" || list[1].State != core.ExportFailed || list[1].Error != "companion restarted" {
		t.Fatalf("ListExports = %+v", list)
	}
	if none := must(s.ListExports(ctx, "nope")); none == nil || len(none) != 0 {
		t.Errorf("ListExports of an unknown workspace = %#v, want an empty list", none)
	}

	// PutExport keeps the owner first written; GiveExports changes it,
	// for one workspace's records of one owner only.
	moved := done
	moved.Owner = "someone else"
	if err := s.PutExport(ctx, moved); err != nil {
		t.Fatal(err)
	}
	other := run
	other.ID, other.WorkspaceID = "exp3", "w2"
	if err := s.PutExport(ctx, other); err != nil {
		t.Fatal(err)
	}
	if got := must(s.GetExport(ctx, "exp2")); got.Owner != "u" {
		t.Fatalf("PutExport changed the owner to %q", got.Owner)
	}
	if n := must(s.GiveExports(ctx, "w", "u", "v")); n != 2 {
		t.Fatalf("GiveExports changed %d records, want w's 2", n)
	}
	for id, want := range map[string]string{"exp1": "v", "exp2": "v", "exp3": "u"} {
		if got := must(s.GetExport(ctx, id)); got.Owner != want {
			t.Errorf("%s's owner is %q after GiveExports, want %q", id, got.Owner, want)
		}
	}
	if n := must(s.GiveExports(ctx, "w", "u", "v")); n != 0 {
		t.Errorf("a second GiveExports changed %d records", n)
	}
}

// unfinishedExports: recovery finds every running record, of every
// workspace and owner, oldest first, with what it is of; none in any
// other state; and a record failed since is no longer found.
func unfinishedExports(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _, _ := open(t, e)
	put := func(id, ws, state string, at time.Duration) core.ExportRecord {
		r := core.ExportRecord{ID: id, WorkspaceID: ws, Owner: "u-" + ws, WorkspaceName: "name of " + ws, Provider: "docker",
			AccountID: "acc-" + ws, CreatedAt: epoch.Add(at), UpdatedAt: epoch.Add(at), State: state, Files: []core.ExportFile{}}
		switch state {
		case core.ExportVerified:
			r.Verified, r.Dir, r.Files = true, "/x/"+id, []core.ExportFile{{Name: "a.zip", Kind: "trajectory", Bytes: 1, SHA256: "ab"}}
		case core.ExportFailed:
			r.Error = "disk full"
		}
		if err := s.PutExport(ctx, r); err != nil {
			t.Fatalf("put %s: %v", id, err)
		}
		return r
	}
	if none := must(s.UnfinishedExports(ctx)); none == nil || len(none) != 0 {
		t.Fatalf("UnfinishedExports of an empty store = %#v, want an empty list", none)
	}
	late := put("late", "w1", core.ExportRunning, time.Hour)
	early := put("early", "w2", core.ExportRunning, time.Minute)
	put("done", "w1", core.ExportVerified, 0)
	put("bad", "w2", core.ExportFailed, 0)
	put("cut", "w1", core.ExportExpiring, 0)
	put("gone", "w1", core.ExportExpired, 0)
	if got := must(s.UnfinishedExports(ctx)); !reflect.DeepEqual(got, []core.ExportRecord{early, late}) {
		t.Fatalf("UnfinishedExports = %+v\nwant %+v", got, []core.ExportRecord{early, late})
	}
	early.State, early.Error, early.UpdatedAt = core.ExportFailed, "companion restarted", epoch.Add(2*time.Hour)
	if err := s.PutExport(ctx, early); err != nil {
		t.Fatal(err)
	}
	if got := must(s.UnfinishedExports(ctx)); !reflect.DeepEqual(got, []core.ExportRecord{late}) {
		t.Fatalf("UnfinishedExports after one failed = %+v, want only %s", got, late.ID)
	}
}

// exportsToExpire: an account's expiring records come first, then its
// verified ones made at or before the bound, oldest first, within the
// limit; other accounts, running, failed and expired records never.
func exportsToExpire(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _, _ := open(t, e)
	put := func(id, account, state string, at time.Duration) {
		r := core.ExportRecord{ID: id, WorkspaceID: "w", Owner: "u", AccountID: account, CreatedAt: epoch.Add(at), UpdatedAt: epoch.Add(at), State: state}
		if state == core.ExportVerified {
			r.Verified, r.Dir, r.Files = true, "/x/"+id, []core.ExportFile{{Name: "a.zip", Kind: "trajectory", Bytes: 1, SHA256: "ab"}}
		}
		if err := s.PutExport(ctx, r); err != nil {
			t.Fatalf("put %s: %v", id, err)
		}
	}
	put("old2", "a", core.ExportVerified, 2*time.Minute)
	put("old1", "a", core.ExportVerified, time.Minute)
	put("young", "a", core.ExportVerified, time.Hour)
	put("cut", "a", core.ExportExpiring, 2*time.Hour)
	put("gone", "a", core.ExportExpired, 0)
	put("failed", "a", core.ExportFailed, 0)
	put("running", "a", core.ExportRunning, 0)
	put("other", "b", core.ExportVerified, 0)
	ids := func(list []core.ExportRecord) []string {
		var out []string
		for _, r := range list {
			out = append(out, r.ID)
		}
		return out
	}
	if got := ids(must(s.ExportsToExpire(ctx, "a", epoch.Add(30*time.Minute), 10))); !reflect.DeepEqual(got, []string{"cut", "old1", "old2"}) {
		t.Errorf("ExportsToExpire = %v, want [cut old1 old2]", got)
	}
	if got := ids(must(s.ExportsToExpire(ctx, "a", epoch.Add(30*time.Minute), 2))); !reflect.DeepEqual(got, []string{"cut", "old1"}) {
		t.Errorf("ExportsToExpire limited to 2 = %v, want [cut old1]", got)
	}
	if got := must(s.ExportsToExpire(ctx, "nobody", epoch.Add(time.Hour), 10)); len(got) != 0 {
		t.Errorf("ExportsToExpire of an unknown account = %v", ids(got))
	}
}

func modulePins(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _, _ := open(t, e)
	if err := s.PutModulePin(ctx, "zeta", "h1", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutModulePin(ctx, "alpha", "h2", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.PutModulePin(ctx, "zeta", "h3", []byte(`{"v":2}`)); err != nil {
		t.Fatal(err)
	}
	sum, manifest, err := s.ModulePin(ctx, "zeta")
	if err != nil || sum != "h3" || string(manifest) != `{"v":2}` {
		t.Fatalf("ModulePin = %q, %q, %v", sum, manifest, err)
	}
	if names := must(s.ListModulePins(ctx)); !reflect.DeepEqual(names, []string{"alpha", "zeta"}) {
		t.Fatalf("ListModulePins = %v", names)
	}
	if err := s.DeleteModulePin(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.ModulePin(ctx, "alpha")
	wantKind(t, "ModulePin after delete", err, core.KindNotFound)
}

func sealedSecrets(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _, _ := open(t, e)
	for _, k := range []string{"a", "b"} {
		if err := s.PutSealedSecret(ctx, k, "key1", []byte("sealed-"+k)); err != nil {
			t.Fatal(err)
		}
	}
	if n := must(s.CountSealedSecrets(ctx)); n != 2 {
		t.Fatalf("CountSealedSecrets = %d", n)
	}
	// A reseal that fails on one row changes none.
	boom := errors.New("boom")
	_, err := s.ResealSecrets(ctx, func(key, keyID string, sealed []byte) (string, []byte, error) {
		if key == "b" {
			return "", nil, boom
		}
		return "key2", []byte("new"), nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("failing reseal: %v", err)
	}
	if id, sealed, _ := s.SealedSecret(ctx, "a"); id != "key1" || string(sealed) != "sealed-a" {
		t.Fatalf("a failed reseal changed row a: %q %q", id, sealed)
	}
	n, err := s.ResealSecrets(ctx, func(key, keyID string, sealed []byte) (string, []byte, error) {
		return "key2", append([]byte("re-"), sealed...), nil
	})
	if err != nil || n != 2 {
		t.Fatalf("ResealSecrets = %d, %v", n, err)
	}
	if id, sealed, _ := s.SealedSecret(ctx, "b"); id != "key2" || string(sealed) != "re-sealed-b" {
		t.Fatalf("after reseal b = %q %q", id, sealed)
	}
	if err := s.DeleteSealedSecret(ctx, "a"); err != nil {
		t.Fatal(err)
	}
}

func reopenKeepsEverything(t *testing.T, e Engine) {
	ctx := context.Background()
	s, reopen, _ := open(t, e)
	id := must(s.InstanceID(ctx))
	if id == "" {
		t.Fatal("empty instance id")
	}
	must(s.SaveWorkspace(ctx, FullWorkspace("w")))
	must(s.SaveWorkspace(ctx, FullWorkspace("w")))
	s.Close()
	s2 := reopen()
	if id2 := must(s2.InstanceID(ctx)); id2 != id {
		t.Errorf("instance id changed on reopen: %s then %s", id, id2)
	}
	saved := must(s2.SaveWorkspace(ctx, FullWorkspace("w")))
	if saved.Rev != 3 {
		t.Errorf("revision after reopen = %d, want 3 (the counter never goes back)", saved.Rev)
	}
}

func cancelledSaveNoGap(t *testing.T, e Engine) {
	s, _, _ := open(t, e)
	must(s.SaveWorkspace(context.Background(), core.Workspace{ID: "ws_1"}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.SaveWorkspace(ctx, core.Workspace{ID: "ws_2"}); err == nil {
		t.Fatal("save with a cancelled context succeeded")
	}
	if saved := must(s.SaveWorkspace(context.Background(), core.Workspace{ID: "ws_3"})); saved.Rev != 2 {
		t.Fatalf("revision after a cancelled save = %d, want 2", saved.Rev)
	}
}

// feedAcrossRestart runs core's change feed on the store: live delivery,
// then a restart, catch-up with ?since, and a prune below the floor.
func feedAcrossRestart(t *testing.T, e Engine) {
	ctx := context.Background()
	s, reopen, c := open(t, e)
	feed := must(core.NewFeed(ctx, s))
	_, _, sub := feed.SubscribeSnapshot(16)
	a := must(feed.Save(ctx, core.Workspace{ID: "ws_a", State: core.StateRunning}))
	b := must(feed.Save(ctx, core.Workspace{ID: "ws_b", State: core.StatePaused}))
	b.Removed = true
	gone := must(feed.Save(ctx, b))
	for _, want := range []int64{a.Rev, b.Rev, gone.Rev} {
		if ch := <-sub.C; ch.Rev != want {
			t.Fatalf("subscriber got revision %d, want %d", ch.Rev, want)
		}
	}
	sub.Close()
	s.Close()

	s = reopen()
	feed = must(core.NewFeed(ctx, s))
	rev, snap := feed.Snapshot()
	if rev != 3 || len(snap) != 1 || snap[0].ID != "ws_a" {
		t.Fatalf("after restart: rev %d, snapshot %+v", rev, snap)
	}
	changes, rev, complete, sub, err := feed.SubscribeSince(ctx, 1, 16)
	got := make([]core.Workspace, len(changes))
	for i, ch := range changes {
		got[i] = ch.Workspace
	}
	if want := pick(e, "ws_b@2 -ws_b@3", "-ws_b@3"); err != nil || !complete || rev != 3 || revs(got) != want {
		t.Fatalf("SubscribeSince(1) = %s, rev %d, complete %v, %v; want %s", revs(got), rev, complete, err, want)
	}
	sub.Close()
	c.set(epoch.Add(time.Hour))
	if err := s.PruneTombstones(ctx, epoch.Add(2*time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, complete, sub, _ := feed.SubscribeSince(ctx, 1, 16); complete || sub != nil {
		t.Fatal("SubscribeSince below the floor should ask for a snapshot")
	}
}
