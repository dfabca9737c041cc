package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// AgentKeyKey is the secret-store key of a workspace's agent-server key.
// It is keyed by workspace, not by box: a resume that remaps the workspace
// to a new box keeps the key without moving anything.
func AgentKeyKey(workspaceID string) string { return "workspace/" + workspaceID + "/agent-key" }

// agentKey returns the workspace's agent-server key, generating and storing
// one first if there is none. It is stored before the create runs, so a
// create retried after a crash sets the same key. Without a secrets store
// it returns "" and the adapter makes its own key, as before; so it does
// when the store is unavailable (no OS keyring), with a warning: a box
// that opens only with a key nobody kept would be worse than one whose
// adapter reports its own key.
func (s *Service) agentKey(ctx context.Context, wsID string) (string, error) {
	if s.cfg.Secrets == nil {
		return "", nil
	}
	k, err := s.cfg.Secrets.Get(ctx, AgentKeyKey(wsID))
	if err == nil && k != "" {
		return k, nil
	}
	if IsKind(err, KindUnavailable) {
		s.log.Warn("secrets store unavailable: the provider makes this box's agent-server key", "workspace", wsID, "err", messageOf(err))
		return "", nil
	}
	if err != nil && !IsKind(err, KindNotFound) {
		return "", fmt.Errorf("read the agent-server key of workspace %s: %w", wsID, err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make an agent-server key: %w", err)
	}
	k = hex.EncodeToString(b[:])
	if err := s.cfg.Secrets.Set(ctx, AgentKeyKey(wsID), k); IsKind(err, KindUnavailable) {
		s.log.Warn("secrets store unavailable: the provider makes this box's agent-server key", "workspace", wsID, "err", messageOf(err))
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("store the agent-server key of workspace %s: %w", wsID, err)
	}
	return k, nil
}

// forgetAgentKey removes a removed workspace's key. A failure is logged:
// the workspace is gone either way, and a stale key opens nothing.
func (s *Service) forgetAgentKey(ctx context.Context, wsID string) {
	if s.cfg.Secrets == nil {
		return
	}
	if err := s.cfg.Secrets.Delete(context.WithoutCancel(ctx), AgentKeyKey(wsID)); err != nil && !IsKind(err, KindNotFound) {
		s.log.Warn("could not remove the agent-server key of a removed workspace", "workspace", wsID, "err", messageOf(err))
	}
}

// AgentAccess is what a client needs to reach a workspace's agent-server:
// the provider's endpoint and the session key. Both are secrets.
type AgentAccess struct {
	Endpoint Endpoint
	Key      string
}

// agentAccess asks p where ws's box's agent-server is and finds the key:
// the one the provider issued when it issues them (ProviderSessionKey),
// else the one companion keeps in the secrets store, else (a box created
// before companion kept keys) the one the adapter reads back from the box.
func (s *Service) agentAccess(ctx context.Context, ws Workspace, acct Account, p Provider, info ProviderInfo) (AgentAccess, error) {
	er, ok := p.(EndpointReporter)
	if !ok {
		return AgentAccess{}, Errorf(KindInvalid, "provider %s cannot say where a box's agent-server is", info.Name)
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	ep, err := er.Endpoint(cctx, acct, ws.BoxID)
	if err != nil {
		return AgentAccess{}, err
	}
	if info.ProviderSessionKey {
		// The provider's key is the box's; companion's may never have
		// reached it, and a resume replaces it.
		box, err := p.Get(cctx, acct, ws.BoxID)
		if err != nil {
			return AgentAccess{}, err
		}
		if box.Key == "" {
			return AgentAccess{}, Errorf(KindUnavailable, "provider %s reported no agent-server key for box %s", info.Name, ws.BoxID)
		}
		return AgentAccess{Endpoint: ep, Key: box.Key}, nil
	}
	key := ""
	if s.cfg.Secrets != nil {
		key, err = s.cfg.Secrets.Get(ctx, AgentKeyKey(ws.ID))
		if err != nil && !IsKind(err, KindNotFound) && !IsKind(err, KindUnavailable) {
			return AgentAccess{}, fmt.Errorf("read the agent-server key of workspace %s: %w", ws.ID, err)
		}
	}
	if key == "" {
		box, err := p.Get(cctx, acct, ws.BoxID)
		if err != nil {
			return AgentAccess{}, err
		}
		key = box.Key
	}
	return AgentAccess{Endpoint: ep, Key: key}, nil
}
