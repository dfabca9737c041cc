package core

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Connecting a person to the agent in a box: companion wakes the box,
// waits for its agent-server, and then forwards the person's requests to
// it (package agentproxy), attaching the provider's and the box's
// credentials itself. Front ends never see where the box is or its key.

// AgentProbe reads a box's agent-server without moving its idle clock:
// whether it is ready (GET /ready) and how long it has been idle (GET
// /server_info). The binary's is agentproxy's.
type AgentProbe interface {
	Ready(ctx context.Context, acc AgentAccess) (bool, error)
	Idle(ctx context.Context, acc AgentAccess) (time.Duration, error)
}

// Bounds of a connect.
const (
	// ConnectWakeWait bounds waiting for a paused box to run again.
	ConnectWakeWait = 3 * time.Minute
	// ConnectReadyWait bounds waiting for the agent-server's /ready once
	// the box runs (the seeds allow 20 s after a wake).
	ConnectReadyWait = 20 * time.Second
	// agentCacheTTL is how long a resolved endpoint is used without asking
	// the adapter again; a request that fails on a rotated endpoint asks
	// at once (AgentTarget with fresh).
	agentCacheTTL = 2 * time.Minute
)

// ConnectResult is what a connect did.
type ConnectResult struct {
	Workspace Workspace
	// Woke is set when the box was paused or stopped and was resumed.
	Woke bool
}

// Connect makes a workspace's agent-server reachable for owner: a paused
// or stopped box is resumed (a journaled resume, audited) and waited for,
// the endpoint is resolved afresh (providers rotate tokens and hostnames
// on start), and the agent-server's /ready is awaited. Progress shows on
// the workspace. A box that does not get there within the bounds is
// KindUnavailable, with why.
func (s *Service) Connect(ctx context.Context, owner, id string) (ConnectResult, error) {
	ws, err := s.Workspace(owner, id)
	if err != nil {
		return ConnectResult{}, err
	}
	var res ConnectResult
	switch ws.State {
	case StateRunning, StateResuming:
	case StatePaused, StateStopped:
		if _, err := s.Resume(ctx, owner, id); err != nil {
			return ConnectResult{}, err
		}
		res.Woke = true
	default:
		return ConnectResult{}, &Error{Kind: KindConflict, State: ws.State, Message: fmt.Sprintf(
			"workspace %s is %s; only a running, paused or stopped workspace can be connected to", id, ws.State)}
	}
	if ws, err = s.waitRunning(ctx, owner, id); err != nil {
		return ConnectResult{}, err
	}
	res.Workspace = ws
	return res, s.awaitAgent(ctx, owner, id)
}

// waitRunning waits, on the service's clock, until the workspace runs.
func (s *Service) waitRunning(ctx context.Context, owner, id string) (Workspace, error) {
	deadline := s.now().Add(ConnectWakeWait)
	for {
		ws, err := s.Workspace(owner, id)
		if err != nil {
			return Workspace{}, err
		}
		switch ws.State {
		case StateRunning:
			return ws, nil
		case StateResuming, StateCreating:
		default:
			why := ws.Error
			if why == "" {
				why = "it is " + string(ws.State)
			}
			return Workspace{}, &Error{Kind: KindUnavailable, State: ws.State, Message: fmt.Sprintf("workspace %s did not wake: %s", id, why)}
		}
		if !s.now().Before(deadline) {
			return Workspace{}, Errorf(KindUnavailable, "workspace %s is still %s after %s; try connecting again", id, ws.State, ConnectWakeWait)
		}
		if !sleep(ctx, s.cfg.Clock, 200*time.Millisecond) {
			return Workspace{}, ctx.Err()
		}
	}
}

// awaitAgent resolves the endpoint afresh and waits for /ready, under
// the workspace's lock so that progress is published on its latest
// state.
func (s *Service) awaitAgent(ctx context.Context, owner, id string) error {
	ws, acct, p, info, unlock, err := s.acquire(ctx, owner, id)
	if err != nil {
		return err
	}
	defer unlock()
	if ws.State != StateRunning {
		return &Error{Kind: KindConflict, State: ws.State, Message: fmt.Sprintf("workspace %s became %s while connecting", id, ws.State)}
	}
	acc, err := s.resolveAgent(ctx, ws, acct, p, info)
	if err != nil {
		return err
	}
	if s.cfg.AgentProbe == nil {
		return nil
	}
	prog := s.newProgress(ctx, ws)
	defer func() {
		prog.stop()
		if cur, ok := s.feed.Get(id); ok && cur.Progress != "" {
			cur.Progress = ""
			s.feed.Save(context.WithoutCancel(ctx), cur)
		}
	}()
	prog.report("connect: waiting for the agent-server")
	deadline := s.now().Add(ConnectReadyWait)
	var last error
	for {
		cctx, cancel := s.callCtx(ctx)
		ok, err := s.cfg.AgentProbe.Ready(cctx, acc)
		cancel()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if !s.now().Before(deadline) {
			why := "it kept answering that it is initializing"
			if last != nil {
				why = messageOf(last)
			}
			return &Error{Kind: KindUnavailable, Message: fmt.Sprintf("the agent-server of workspace %s was not ready within %s: %s", id, ConnectReadyWait, why), Err: last}
		}
		if !sleep(ctx, s.cfg.Clock, 250*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// AgentTarget is how to reach the agent-server of owner's running
// workspace, for forwarding a person's request: from a short cache,
// unless fresh asks the adapter again (a request met a rotated
// endpoint). Another owner's workspace is not found; one that is not
// running is KindConflict.
func (s *Service) AgentTarget(ctx context.Context, owner, id string, fresh bool) (AgentAccess, error) {
	ws, err := s.Workspace(owner, id)
	if err != nil {
		return AgentAccess{}, err
	}
	if ws.BoxID == "" || ws.State != StateRunning {
		return AgentAccess{}, &Error{Kind: KindConflict, State: ws.State, Message: fmt.Sprintf(
			"workspace %s is %s; connect first (POST /v1/workspaces/%s/connect wakes it)", id, ws.State, id)}
	}
	if !fresh {
		if acc, ok := s.agents.get(id, ws.BoxID, s.now()); ok {
			return acc, nil
		}
	}
	acct, err := s.cfg.Store.GetAccount(ctx, ws.AccountID)
	if err != nil {
		return AgentAccess{}, err
	}
	p, info, err := s.provider(ctx, acct)
	if err != nil {
		return AgentAccess{}, err
	}
	return s.resolveAgent(ctx, ws, acct, p, info)
}

// resolveAgent asks the adapter and caches the answer.
func (s *Service) resolveAgent(ctx context.Context, ws Workspace, acct Account, p Provider, info ProviderInfo) (AgentAccess, error) {
	acc, err := s.agentAccess(ctx, ws, acct, p, info)
	if err != nil {
		return AgentAccess{}, err
	}
	s.agents.put(ws.ID, ws.BoxID, acc, s.now())
	return acc, nil
}

// agentCache keeps resolved agent-server endpoints briefly, per
// workspace and box: resolving may cost a provider API call (a preview
// URL), which must not happen on every proxied request.
type agentCache struct {
	mu sync.Mutex
	m  map[string]cachedAgent
}

type cachedAgent struct {
	box string
	acc AgentAccess
	at  time.Time
}

func (c *agentCache) get(id, box string, now time.Time) (AgentAccess, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok || e.box != box || now.Sub(e.at) > agentCacheTTL {
		return AgentAccess{}, false
	}
	return e.acc, true
}

func (c *agentCache) put(id, box string, acc AgentAccess, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cachedAgent{}
	}
	c.m[id] = cachedAgent{box: box, acc: acc, at: now}
}

// forget drops a workspace's endpoint: its box was paused, resumed or
// deleted, and providers rotate tokens and hostnames on start.
func (c *agentCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}
