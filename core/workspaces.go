package core

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Workspaces lists owner's live workspaces, newest first.
func (s *Service) Workspaces(owner string) []Workspace {
	_, all := s.feed.Snapshot()
	out := all[:0]
	for _, ws := range all {
		if ws.Owner == owner {
			out = append(out, ws)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Workspace returns one of owner's live workspaces.
func (s *Service) Workspace(owner, id string) (Workspace, error) {
	ws, ok := s.feed.Get(id)
	if !ok || ws.Owner != owner {
		return Workspace{}, Errorf(KindNotFound, "workspace %q not found", id)
	}
	return ws, nil
}

// CreateRequest asks for a new workspace.
type CreateRequest struct {
	AccountID string
	Name      string
	Lifecycle Lifecycle
	Options   map[string]string
}

func validateCreate(req CreateRequest) error {
	if err := validateName(req.Name); err != nil {
		return err
	}
	if req.Lifecycle.IdlePauseAfter < 0 || req.Lifecycle.PausedTTL < 0 {
		return Errorf(KindInvalid, "lifecycle durations must not be negative")
	}
	if len(req.Options) > 32 {
		return Errorf(KindInvalid, "at most 32 options are allowed")
	}
	for k, v := range req.Options {
		if k == "" || len(k) > 64 || len(v) > 1024 {
			return Errorf(KindInvalid, "option %q: names are 1-64 bytes and values at most 1024 bytes", k)
		}
		if err := checkPrintable(fmt.Sprintf("option name %q", k), k); err != nil {
			return err
		}
		if err := checkPrintable("options."+k, v); err != nil {
			return err
		}
	}
	return nil
}

// checkLifecycle refuses settings the provider cannot enforce itself.
// companion runs no idle or expiry timers of its own yet, so accepting one
// would promise something nobody does.
func checkLifecycle(info ProviderInfo, l Lifecycle) error {
	if l.IdlePauseAfter > 0 && !info.Capabilities.NativeIdlePause {
		return Errorf(KindInvalid, "provider %s cannot pause idle workspaces on its own, and companion does not pause them for it; leave idle_pause_after unset", info.Name)
	}
	if l.PausedTTL > 0 && !info.Capabilities.NativePausedTTL {
		return Errorf(KindInvalid, "provider %s cannot delete long-paused workspaces on its own, and companion does not delete them for it; leave paused_ttl unset", info.Name)
	}
	return nil
}

// Create starts a new workspace. It returns once the workspace is recorded
// in state creating; the provider call continues in the background and its
// outcome arrives through the feed.
func (s *Service) Create(ctx context.Context, owner string, req CreateRequest) (Workspace, error) {
	if err := validateCreate(req); err != nil {
		return Workspace{}, err
	}
	acct, err := s.Account(ctx, owner, req.AccountID)
	if err != nil {
		return Workspace{}, err
	}
	p, info, err := s.provider(ctx, acct)
	if err != nil {
		return Workspace{}, err
	}
	if err := checkLifecycle(info, req.Lifecycle); err != nil {
		return Workspace{}, err
	}
	if err := s.checkClocks(info, req.Lifecycle); err != nil {
		return Workspace{}, err
	}
	if err := checkOptions(info, req.Options); err != nil {
		return Workspace{}, err
	}
	if cc, ok := p.(CreateChecker); ok {
		if err := cc.CheckCreate(ctx, acct, CreateSpec{Name: strings.TrimSpace(req.Name), Lifecycle: req.Lifecycle, Options: req.Options}); err != nil {
			return Workspace{}, err
		}
	} else if pg, ok := p.(Pinger); ok {
		if err := pg.Ping(ctx); err != nil {
			return Workspace{}, err
		}
	}
	now := s.now()
	ws := Workspace{
		ID:        NewID("ws"),
		Owner:     owner,
		Name:      strings.TrimSpace(req.Name),
		AccountID: acct.ID,
		Provider:  acct.Provider,
		State:     StateCreating,
		Lifecycle: req.Lifecycle,
		Options:   req.Options,
		CreatedAt: now,
	}
	// A fresh id is free; only a shared store's lease can fail (the
	// database is unreachable).
	unlock, ok := s.locks.tryLock(ws.ID)
	if !ok {
		return Workspace{}, Errorf(KindUnavailable, "could not lock the new workspace in companion's database; try again")
	}
	ws, err = s.launch(ctx, ws, acct, OpCreate, StateCreating, unlock)
	if err != nil {
		unlock()
	}
	return ws, err
}

// launch journals an action, records the workspace's transitional state
// and runs the action in the background, which from then on owns the
// workspace's lock. If launch fails, the lock is still the caller's.
func (s *Service) launch(ctx context.Context, ws Workspace, acct Account, kind OpKind, state State, unlock func()) (Workspace, error) {
	now := s.now()
	actor := ActorOf(ctx, ActorRecovery)
	op := Op{WorkspaceID: ws.ID, Kind: kind, Step: "requested", CreatedAt: now, UpdatedAt: now}
	if kind == OpDelete {
		// What the delete was asked for, before the state says deleting.
		op.Delete = newDeleteJournal(ws, actor, s.now())
	}
	op, err := s.cfg.Store.PutOp(ctx, op)
	if err != nil {
		return Workspace{}, err
	}
	ws.State, ws.Error = state, ""
	if ws, err = s.feed.Save(ctx, ws); err != nil {
		s.dropOp(op)
		return Workspace{}, err
	}
	s.log.Info("workspace "+string(kind)+" started", "workspace", ws.ID, "provider", ws.Provider, "box", ws.BoxID)
	s.rememberActor(op.ID, actor)
	s.audit(ctx, AuditEntry{Owner: ws.Owner, Actor: actor, Action: opAudit(kind), WorkspaceID: ws.ID,
		AccountID: ws.AccountID, Provider: ws.Provider, Outcome: "started"})
	s.goOp(op, unlock, func(ctx context.Context) { s.runOp(ctx, op, ws, acct) })
	return ws, nil
}

// lockWait is how long a request waits for a workspace's lock before it
// answers "busy": long enough to cover an action that is saving its outcome,
// short enough that a request never hangs behind a long provider call.
const lockWait = 2 * time.Second

// acquire takes the workspace's lock and loads what an action needs. The
// caller must call unlock unless err is non-nil.
func (s *Service) acquire(ctx context.Context, owner, id string) (ws Workspace, acct Account, p Provider, info ProviderInfo, unlock func(), err error) {
	return s.lockAndLoad(ctx, owner, id, false)
}

// lockAndLoad is acquire; with boxlessOK, a workspace with no box gets a
// nil provider instead of the provider's error.
func (s *Service) lockAndLoad(ctx context.Context, owner, id string, boxlessOK bool) (ws Workspace, acct Account, p Provider, info ProviderInfo, unlock func(), err error) {
	ws, err = s.lookup(ctx, owner, id)
	if err != nil {
		return
	}
	h, ok := s.locks.lockWithinRead(id, lockWait)
	if !ok {
		err = &Error{Kind: KindConflict, Message: fmt.Sprintf("workspace %s is busy (%s); wait for the running action to finish", id, ws.State), State: ws.State}
		return
	}
	unlock = h.unlock
	fail := func(e error) { unlock(); unlock = nil; err = e }
	// Re-read under the lock: the workspace may have changed meanwhile,
	// on a shared store through another replica (whose store read came
	// with the lease).
	if ws, err = s.freshOfHeld(ctx, owner, id, h); err != nil {
		fail(err)
		return
	}
	if acct, err = s.cfg.Store.GetAccount(ctx, ws.AccountID); err != nil {
		fail(err)
		return
	}
	// A person acts on a workspace of an account whose lists failed: the
	// provider may be back (Docker restarted), and the reconciler's
	// backoff must not keep its other workspaces stale meanwhile. It
	// lists the account again now.
	if s.AccountStatusOf(acct.ID).State == AccountFailing {
		s.Kick(acct.ID)
	}
	if p, info, err = s.provider(ctx, acct); err != nil {
		if !boxlessOK || ws.BoxID != "" {
			fail(err)
			return
		}
		p, info, err = nil, ProviderInfo{Name: acct.Provider}, nil
	}
	return
}

// refresh re-reads the box's real state from the provider and records what
// changed. A box that is gone leaves the workspace in state deleted.
func (s *Service) refresh(ctx context.Context, ws Workspace, acct Account, p Provider) (Workspace, error) {
	if ws.BoxID == "" {
		return ws, nil
	}
	updated, err := s.reread(ctx, ws, acct, p)
	if IsKind(err, KindNotFound) {
		ws.Error = vanishedError(ws)
		ws.State = StateDeleted
		saved, serr := s.feed.Save(ctx, ws)
		if serr != nil {
			return ws, serr
		}
		return saved, nil
	}
	if err != nil {
		return ws, err
	}
	if updated.State == StateDeleted && ws.State != StateDeleted && ws.State != StateDeleting {
		// The provider still answers for the box, as deleted.
		updated.Error = vanishedError(ws)
	}
	if changed(ws, updated) {
		return s.feed.Save(ctx, updated)
	}
	return ws, nil
}

func illegal(ws Workspace, action string) error {
	return &Error{Kind: KindConflict, Message: fmt.Sprintf("cannot %s workspace %s: it is %s", action, ws.ID, ws.State), State: ws.State}
}

// Pause suspends a running workspace.
func (s *Service) Pause(ctx context.Context, owner, id string) (Workspace, error) {
	return s.startAction(ctx, owner, id, OpPause)
}

// Resume wakes a paused workspace. The box may come back with a new
// identity; the workspace keeps its id.
func (s *Service) Resume(ctx context.Context, owner, id string) (Workspace, error) {
	return s.startAction(ctx, owner, id, OpResume)
}

func (s *Service) startAction(ctx context.Context, owner, id string, kind OpKind) (Workspace, error) {
	ws, acct, p, info, unlock, err := s.acquire(ctx, owner, id)
	if err != nil {
		return Workspace{}, err
	}
	release := true
	defer func() {
		if release {
			unlock()
		}
	}()
	if !info.Capabilities.Suspend {
		return Workspace{}, Errorf(KindInvalid, "provider %s cannot pause or resume workspaces", info.Name)
	}
	if ws, err = s.refresh(ctx, ws, acct, p); err != nil {
		return Workspace{}, err
	}
	next := StatePausing
	legal := ws.State.canPause()
	if kind == OpResume {
		next, legal = StateResuming, ws.State.canResume()
	}
	if !legal {
		return Workspace{}, illegal(ws, string(kind))
	}
	if ws, err = s.launch(ctx, ws, acct, kind, next, unlock); err != nil {
		return Workspace{}, err
	}
	release = false
	return ws, nil
}

// SetKeep marks a workspace as exempt from scheduled deletion, or not.
func (s *Service) SetKeep(ctx context.Context, owner, id string, keep bool) (Workspace, error) {
	ws, err := s.lookup(ctx, owner, id)
	if err != nil {
		return Workspace{}, err
	}
	// The store work of this action is what db's BenchmarkEngines times
	// as "one action" (lock with re-read, save releasing the lock): keep
	// the two alike.
	h, ok := s.locks.lockWithinRead(id, lockWait)
	if !ok {
		return Workspace{}, &Error{Kind: KindConflict, Message: fmt.Sprintf("workspace %s is busy (%s); try again shortly", id, ws.State), State: ws.State}
	}
	if ws, err = s.freshOfHeld(ctx, owner, id, h); err != nil {
		h.unlock()
		return Workspace{}, err
	}
	ws.Keep = keep
	if keep {
		ws.DeleteAfter = time.Time{}
	}
	return s.saveUnlocking(ctx, ws, h)
}
