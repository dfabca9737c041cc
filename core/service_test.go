package core_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/dockertest"
	"github.com/canvasapp/companion/providers/builtin/docker"
)

// These tests run the lifecycle service against real parts: a SQLite file
// and the machine's Docker Engine through the built-in docker adapter, with
// the agent-server emulator image as the box. Each test has its own docker
// scope and removes what it created.

type env struct {
	t     *testing.T
	dir   string
	store *db.Store
	prov  *docker.Provider
	reg   *core.Registry
	svc   *core.Service
	acct  core.Account
	logs  *bytes.Buffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvImage(t, dockertest.BoxImage(t))
}

// newEnvImage is newEnv with boxes of the given image.
func newEnvImage(t *testing.T, imageTag string) *env {
	t.Helper()
	scope := dockertest.Scope(t)
	prov, err := docker.New(docker.Config{Image: imageTag, Scope: scope, StopTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prov.Close() })
	e := &env{t: t, dir: t.TempDir(), prov: prov, reg: &core.Registry{}, logs: &bytes.Buffer{}}
	e.reg.Register("docker", prov)
	e.acct = core.Account{ID: "local-docker", Provider: "docker", Label: "Local Docker"}
	e.open()
	return e
}

// open (re)starts the store and the service on the same data directory.
func (e *env) open() {
	e.t.Helper()
	ctx := context.Background()
	st, err := db.Open(ctx, filepath.Join(e.dir, "companion.db"))
	if err != nil {
		e.t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(e.logs), &slog.HandlerOptions{Level: slog.LevelDebug}))
	svc, err := core.NewService(ctx, core.Config{Store: st, Providers: e.reg, Logger: log, MaxAttempts: 2})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := svc.EnsureAccount(ctx, e.acct); err != nil {
		e.t.Fatal(err)
	}
	e.store, e.svc = st, svc
	e.t.Cleanup(e.close)
}

func (e *env) close() {
	if e.svc == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.svc.Close(ctx)
	e.store.Close()
	e.svc, e.store = nil, nil
}

// waitState polls until the workspace reaches state (or is removed, for
// core.StateDeleted with removed=true).
func (e *env) waitState(id string, state core.State) core.Workspace {
	e.t.Helper()
	var ws core.Workspace
	var err error
	if testsupport.PollErr(90*time.Second, func() error {
		if ws, err = e.svc.Workspace("", id); err == nil && ws.State == state {
			return nil
		}
		return errNotYet
	}) != nil {
		e.t.Fatalf("workspace %s did not reach %s: now %+v, %v\nlogs:\n%s", id, state, ws, err, e.logs)
	}
	return ws
}

var errNotYet = errors.New("not yet")

func (e *env) waitRemoved(id string) {
	e.t.Helper()
	if testsupport.PollErr(90*time.Second, func() error {
		if _, err := e.svc.Workspace("", id); core.IsKind(err, core.KindNotFound) {
			return nil
		}
		return errNotYet
	}) != nil {
		e.t.Fatalf("workspace %s was not removed\nlogs:\n%s", id, e.logs)
	}
}

func (e *env) create(name string) core.Workspace {
	e.t.Helper()
	ws, err := e.svc.Create(context.Background(), "", core.CreateRequest{AccountID: e.acct.ID, Name: name})
	if err != nil {
		e.t.Fatal(err)
	}
	if ws.State != core.StateCreating {
		e.t.Fatalf("new workspace is %s, want creating", ws.State)
	}
	return e.waitState(ws.ID, core.StateRunning)
}

func TestLifecycleAgainstDocker(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ws := e.create("lifecycle")
	if ws.BoxID == "" || !strings.HasPrefix(ws.BoxURL, "http://127.0.0.1:") {
		t.Fatalf("running workspace without box identity: %+v", ws)
	}

	if _, err := e.svc.Resume(ctx, "", ws.ID); !core.IsKind(err, core.KindConflict) {
		t.Fatalf("resume of a running workspace: %v, want conflict", err)
	} else if err.(*core.Error).State != core.StateRunning {
		t.Fatalf("conflict does not carry the current state: %+v", err)
	}

	paused, err := e.svc.Pause(ctx, "", ws.ID)
	if err != nil || paused.State != core.StatePausing {
		t.Fatalf("pause: %+v %v", paused, err)
	}
	if _, err := e.svc.Pause(ctx, "", ws.ID); !core.IsKind(err, core.KindConflict) {
		t.Fatalf("second pause while pausing: %v, want conflict", err)
	}
	ws = e.waitState(ws.ID, core.StatePaused)
	if ws.PausedAt.IsZero() || ws.Size == nil || ws.Size.Source != core.SizeDockerEngineUsed {
		t.Fatalf("paused workspace lacks paused_at or size: %+v", ws)
	}
	box := ws.BoxID

	if _, err := e.svc.Resume(ctx, "", ws.ID); err != nil {
		t.Fatal(err)
	}
	ws = e.waitState(ws.ID, core.StateRunning)
	if ws.BoxID != box || !ws.PausedAt.IsZero() {
		t.Fatalf("resumed workspace: box %s (was %s), paused_at %v", ws.BoxID, box, ws.PausedAt)
	}

	preview, err := e.svc.PreviewDelete(ctx, "", ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	if preview.Token == "" || len(preview.Lost) == 0 || !strings.Contains(strings.Join(preview.Lost, " "), box) {
		t.Fatalf("preview does not say what is lost: %+v", preview)
	}
	if _, err := e.svc.Delete(ctx, "", ws.ID, "not-the-token"); !core.IsKind(err, core.KindInvalid) {
		t.Fatalf("delete with a wrong token: %v, want invalid", err)
	}
	if _, err := e.prov.Get(ctx, e.acct, box); err != nil {
		t.Fatalf("a refused delete touched the box: %v", err)
	}
	if _, err := e.svc.Delete(ctx, "", ws.ID, preview.Token); err != nil {
		t.Fatal(err)
	}
	e.waitRemoved(ws.ID)
	if _, err := e.prov.Get(ctx, e.acct, box); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("box still exists after delete: %v", err)
	}
	if _, err := e.svc.Delete(ctx, "", ws.ID, preview.Token); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("delete of a removed workspace: %v, want not found", err)
	}
}

func TestDeleteRefusedWhenUsedSincePreview(t *testing.T) {
	// The box starts out idle for an hour (its idle clock runs inside the
	// container), far past the tolerance, so new activity is unmistakable.
	e := newEnvImage(t, dockertest.BoxImageEnv(t, map[string]string{"EMULATOR_IDLE_AT_START_SECONDS": "3600"}))
	ctx := context.Background()
	ws := e.create("busy")
	testsupport.Poll(t, 60*time.Second, func() error {
		e.svc.ReconcileAccount(ctx, e.acct)
		cur, err := e.svc.Workspace("", ws.ID)
		if err == nil && (cur.LastActivityAt.IsZero() || time.Since(cur.LastActivityAt) < 59*time.Minute) {
			err = fmt.Errorf("last activity is not the box's hour of idle time: %+v", cur)
		}
		return err
	})
	preview, err := e.svc.PreviewDelete(ctx, "", ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	box, err := e.prov.Get(ctx, e.acct, ws.BoxID)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", box.URL+"/api/bash/execute_bash_command", strings.NewReader(`{"command":"echo hi"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session-API-Key", box.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("activity call: %s", resp.Status)
	}
	_, err = e.svc.Delete(ctx, "", ws.ID, preview.Token)
	if !core.IsKind(err, core.KindConflict) || !strings.Contains(err.Error(), "used since") {
		t.Fatalf("delete after new activity: %v, want conflict saying it was used", err)
	}
	if cur, err := e.svc.Workspace("", ws.ID); err != nil || cur.State != core.StateRunning {
		t.Fatalf("refused delete changed the workspace: %+v %v", cur, err)
	}
	if _, err := e.prov.Get(ctx, e.acct, ws.BoxID); err != nil {
		t.Fatalf("refused delete touched the box: %v", err)
	}
}

// TestRecoverFinishesInterruptedActions leaves the journal as a crash
// would (an action recorded, its provider step not done) and checks that a
// restarted service rolls each action forward.
func TestRecoverFinishesInterruptedActions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	doomed := e.create("doomed")
	e.close()

	// A delete that crashed right after it was journaled.
	st, err := db.Open(ctx, filepath.Join(e.dir, "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := st.PutOp(ctx, core.Op{WorkspaceID: doomed.ID, Kind: core.OpDelete, Step: "provider_delete", Attempts: 1, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	doomed.State = core.StateDeleting
	if _, err := st.SaveWorkspace(ctx, doomed); err != nil {
		t.Fatal(err)
	}
	// A create that crashed before its box existed.
	fresh := core.Workspace{ID: core.NewID("ws"), Name: "fresh", AccountID: e.acct.ID, Provider: "docker", State: core.StateCreating, CreatedAt: now}
	if _, err := st.PutOp(ctx, core.Op{WorkspaceID: fresh.ID, Kind: core.OpCreate, Step: "requested", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SaveWorkspace(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	st.Close()

	e.open()
	if err := e.svc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitRemoved(doomed.ID)
	if _, err := e.prov.Get(ctx, e.acct, doomed.BoxID); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("interrupted delete left the box: %v", err)
	}
	got := e.waitState(fresh.ID, core.StateRunning)
	if got.BoxID == "" {
		t.Fatalf("recovered create has no box: %+v", got)
	}
	box, err := e.prov.Get(ctx, e.acct, got.BoxID)
	if err != nil || box.Labels[core.LabelWorkspace] != fresh.ID {
		t.Fatalf("recovered box not labelled with its workspace: %+v %v", box.Labels, err)
	}
	if ops, _ := e.store.PendingOps(ctx); len(ops) != 0 {
		t.Fatalf("journal not empty after recovery: %+v", ops)
	}
}

func TestReconcilerAdoptsAndNoticesVanishedBoxes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// A box companion did not create (another installation's, say).
	foreign, err := e.prov.Create(ctx, e.acct, core.CreateSpec{WorkspaceID: "ws_made_elsewhere", Name: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.ReconcileAccount(ctx, e.acct); err != nil {
		t.Fatal(err)
	}
	var adopted core.Workspace
	for _, ws := range e.svc.Workspaces("") {
		if ws.BoxID == foreign.ID {
			adopted = ws
		}
	}
	if !adopted.Adopted || adopted.State != core.StateRunning || adopted.Name == "" {
		t.Fatalf("box not adopted as a running workspace: %+v", adopted)
	}
	entries, err := e.svc.Audit(ctx, "", 0, 10)
	if err != nil || len(entries) == 0 || entries[0].Action != core.AuditAdopt || entries[0].Actor != core.ActorReconciler ||
		entries[0].WorkspaceID != adopted.ID {
		t.Fatalf("audit after adoption = %+v, %v; want an adopt entry by the reconciler first", entries, err)
	}
	rev := e.svc.Feed().Rev()
	if err := e.svc.ReconcileAccount(ctx, e.acct); err != nil {
		t.Fatal(err)
	}
	if e.svc.Feed().Rev() != rev {
		// A second pass over unchanged boxes must not publish anything,
		// except the one-time arrival of a size or activity reading.
		if err := e.svc.ReconcileAccount(ctx, e.acct); err != nil {
			t.Fatal(err)
		}
		rev = e.svc.Feed().Rev()
		e.svc.ReconcileAccount(ctx, e.acct)
		if e.svc.Feed().Rev() != rev {
			t.Fatalf("idle reconcile passes keep publishing changes")
		}
	}

	// Removed behind companion's back.
	if err := e.prov.Delete(ctx, e.acct, foreign.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.ReconcileAccount(ctx, e.acct); err != nil {
		t.Fatal(err)
	}
	gone, err := e.svc.Workspace("", adopted.ID)
	if err != nil || gone.State != core.StateDeleted || !strings.Contains(gone.Error, "outside companion") {
		t.Fatalf("vanished box not reported: %+v %v", gone, err)
	}
	// Removing the record of a vanished box needs no provider call.
	preview, err := e.svc.PreviewDelete(ctx, "", adopted.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Delete(ctx, "", adopted.ID, preview.Token); err != nil {
		t.Fatal(err)
	}
	e.waitRemoved(adopted.ID)
	// And the deleted box is not adopted again.
	if err := e.svc.ReconcileAccount(ctx, e.acct); err != nil {
		t.Fatal(err)
	}
	if n := len(e.svc.Workspaces("")); n != 0 {
		t.Fatalf("%d workspaces after removal, want 0", n)
	}
}

func TestActionsOnUnknownOrForeignWorkspaces(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.svc.Pause(ctx, "", "ws_nope"); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("pause unknown: %v", err)
	}
	if _, err := e.svc.PreviewDelete(ctx, "", "ws_nope"); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("preview unknown: %v", err)
	}
	if _, err := e.svc.Create(ctx, "", core.CreateRequest{AccountID: "acc_nope", Name: "x"}); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("create on unknown account: %v", err)
	}
	ws := e.create("mine")
	if _, err := e.svc.Pause(ctx, "someone-else", ws.ID); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("another owner can pause: %v", err)
	}
	if _, err := e.svc.Workspace("someone-else", ws.ID); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("another owner can see: %v", err)
	}
}

func TestEngineUnreachableFailsCleanly(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	dead, err := docker.New(docker.Config{Image: dockertest.BoxImage(t), Scope: "unreachable", Host: "unix:///nonexistent/docker.sock"})
	if err != nil {
		t.Fatal(err)
	}
	e.reg.Register("docker", dead)
	_, err = e.svc.Create(ctx, "", core.CreateRequest{AccountID: e.acct.ID, Name: "x"})
	if !core.IsKind(err, core.KindUnavailable) || !strings.Contains(err.Error(), "DOCKER_HOST") {
		t.Fatalf("create with the engine down: %v, want unavailable saying what to do", err)
	}
	if n := len(e.svc.Workspaces("")); n != 0 {
		t.Fatalf("a refused create left %d workspaces", n)
	}
	if err := e.svc.ReconcileAccount(ctx, e.acct); !core.IsKind(err, core.KindUnavailable) {
		t.Fatalf("reconcile with the engine down: %v", err)
	}
	st := e.svc.Providers(ctx)
	if len(st) != 1 || st[0].Available || !strings.Contains(st[0].Reason, "not reachable") {
		t.Fatalf("provider status: %+v", st)
	}
}

// TestAdoptionRespectsLiveAndForgottenWorkspaces: a box labelled with a
// live workspace of another account is not adopted a second time; after
// that account is removed (its workspaces forgotten, not deleted), the box
// is adopted again.
func TestAdoptionRespectsLiveAndForgottenWorkspaces(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ws := e.create("shared")
	other := core.Account{ID: "docker-two", Provider: "docker", Label: "same engine, second account"}
	if _, err := e.svc.EnsureAccount(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.ReconcileAccount(ctx, other); err != nil {
		t.Fatal(err)
	}
	if n := len(e.svc.Workspaces("")); n != 1 {
		t.Fatalf("%d workspaces: a box of a live workspace was adopted again", n)
	}
	if err := e.svc.RemoveAccount(ctx, "", e.acct.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.ReconcileAccount(ctx, other); err != nil {
		t.Fatal(err)
	}
	list := e.svc.Workspaces("")
	if len(list) != 1 || !list[0].Adopted || list[0].BoxID != ws.BoxID || list[0].AccountID != other.ID {
		t.Fatalf("box of a forgotten workspace not adopted again: %+v", list)
	}
}

// TestRecoverSkipsStaleJournalEntries: an entry left behind after its
// action finished (the workspace is no longer in the action's state) is
// dropped, not re-run.
func TestRecoverSkipsStaleJournalEntries(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ws := e.create("settled")
	now := time.Now().UTC()
	if _, err := e.store.PutOp(ctx, core.Op{WorkspaceID: ws.ID, Kind: core.OpPause, Step: "provider_pause", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if ops, _ := e.store.PendingOps(ctx); len(ops) != 0 {
		t.Fatalf("stale entry kept: %+v", ops)
	}
	box, err := e.prov.Get(ctx, e.acct, ws.BoxID)
	if err != nil || box.State != core.StateRunning {
		t.Fatalf("a stale pause entry paused the box: %+v %v", box, err)
	}
}

// TestDeleteOfAFailedCreateFindsItsBox: a create whose answer was lost
// leaves a workspace in error without a box id, while the box exists.
// Deleting the workspace must find the box by its label and delete it.
func TestDeleteOfAFailedCreateFindsItsBox(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ws := core.Workspace{ID: core.NewID("ws"), Name: "lost answer", AccountID: e.acct.ID, Provider: "docker",
		State: core.StateError, Error: "create failed: timeout", CreatedAt: time.Now().UTC()}
	box, err := e.prov.Create(ctx, e.acct, core.CreateSpec{WorkspaceID: ws.ID, Name: ws.Name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Feed().Save(ctx, ws); err != nil {
		t.Fatal(err)
	}
	preview, err := e.svc.PreviewDelete(ctx, "", ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Delete(ctx, "", ws.ID, preview.Token); err != nil {
		t.Fatal(err)
	}
	e.waitRemoved(ws.ID)
	if _, err := e.prov.Get(ctx, e.acct, box.ID); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("the box of the failed create survived its delete: %v", err)
	}
}

// TestActionWithoutItsProviderSaysSo: an interrupted action whose provider
// is no longer installed leaves the workspace in state unknown with the
// reason, not stuck in its transitional state.
func TestActionWithoutItsProviderSaysSo(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ghost := core.Account{ID: "acc_ghost", Provider: "uninstalled"}
	if _, err := e.svc.EnsureAccount(ctx, ghost); err != nil {
		t.Fatal(err)
	}
	ws := core.Workspace{ID: core.NewID("ws"), Name: "orphan", AccountID: ghost.ID, Provider: "uninstalled",
		State: core.StatePausing, BoxID: "b-1", CreatedAt: time.Now().UTC()}
	if _, err := e.svc.Feed().Save(ctx, ws); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := e.store.PutOp(ctx, core.Op{WorkspaceID: ws.ID, Kind: core.OpPause, Step: "requested", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	got := e.waitState(ws.ID, core.StateUnknown)
	if !strings.Contains(got.Error, "not installed") {
		t.Fatalf("no reason given: %+v", got)
	}
}

// TestEnsureAccountReturnsTheStoredAccount: an account that exists is
// returned as stored, not as asked for, so a caller can compare what the
// data dir remembers (the docker scope) with what it was started with.
func TestEnsureAccountReturnsTheStoredAccount(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	first := core.Account{ID: "acc_fixed", Provider: e.acct.Provider, Label: "fixed", Config: map[string]string{"scope": "a"}}
	got, err := e.svc.EnsureAccount(ctx, first)
	if err != nil || got.Config["scope"] != "a" || got.CreatedAt.IsZero() {
		t.Fatalf("created: %+v %v", got, err)
	}
	again := first
	again.Config = map[string]string{"scope": "b"}
	got, err = e.svc.EnsureAccount(ctx, again)
	if err != nil || got.Config["scope"] != "a" {
		t.Fatalf("second ensure returned %+v %v; want the stored scope a", got, err)
	}
}

// runReconciler runs svc's reconciler until the returned stop is called or
// the test ends; stop waits for it to return and may be called again.
func runReconciler(t *testing.T, svc *core.Service, cfg core.ReconcileConfig) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.RunReconciler(ctx, cfg)
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}
