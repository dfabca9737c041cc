package core

import (
	"context"
	"sync"
	"time"
)

// Who is connected. The agent proxy tells core how many of a person's
// requests and sockets are open to each workspace's agent-server
// (NoteAgentConnections). That makes rule 2 of the design enforceable:
// a read from inside a box happens only while a person is connected to
// it, never on a timer for a box nobody uses. The one such read is the
// agent-server's /server_info (which does not move its idle clock), for
// the last activity of boxes whose provider's list does not report it.

// DefaultConnectedReadEvery is how often the boxes people are connected
// to are read.
const DefaultConnectedReadEvery = time.Minute

// connections counts open agent connections per workspace.
type connections struct {
	mu sync.Mutex
	n  map[string]int
}

// NoteAgentConnections records how many connections are open to
// workspace id's agent-server through this process.
func (s *Service) NoteAgentConnections(id string, n int) {
	s.connected.mu.Lock()
	defer s.connected.mu.Unlock()
	if s.connected.n == nil {
		s.connected.n = map[string]int{}
	}
	if n <= 0 {
		delete(s.connected.n, id)
		return
	}
	s.connected.n[id] = n
}

// Connected reports whether a person is connected to workspace id's
// agent-server through this process.
func (s *Service) Connected(id string) bool {
	s.connected.mu.Lock()
	defer s.connected.mu.Unlock()
	return s.connected.n[id] > 0
}

func (s *Service) connectedIDs() []string {
	s.connected.mu.Lock()
	defer s.connected.mu.Unlock()
	out := make([]string, 0, len(s.connected.n))
	for id := range s.connected.n {
		out = append(out, id)
	}
	return out
}

// RunConnectedReads reads, every `every` until ctx ends, the last
// activity of each running workspace a person is connected to whose
// provider's list does not report it. A workspace nobody is connected to
// is never read.
func (s *Service) RunConnectedReads(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultConnectedReadEvery
	}
	for sleep(ctx, s.cfg.Clock, every) {
		for _, id := range s.connectedIDs() {
			if ctx.Err() != nil {
				return
			}
			if err := s.readConnected(ctx, id); err != nil {
				s.log.Debug("could not read a connected box's activity", "workspace", id, "err", messageOf(err))
			}
		}
	}
}

// readConnected reads one connected workspace's activity from its
// agent-server and records it when it changed.
func (s *Service) readConnected(ctx context.Context, id string) error {
	if s.cfg.AgentProbe == nil || !s.Connected(id) {
		return nil
	}
	ws, ok := s.feed.Get(id)
	if !ok || ws.State != StateRunning || ws.BoxID == "" {
		return nil
	}
	acct, err := s.cfg.Store.GetAccount(ctx, ws.AccountID)
	if err != nil {
		return err
	}
	_, info, err := s.provider(ctx, acct)
	if err != nil || info.Capabilities.LastActivity {
		return err // the provider's list says it, with no read inside the box
	}
	acc, err := s.AgentTarget(ctx, ws.Owner, id, false)
	if err != nil {
		return err
	}
	cctx, cancel := s.callCtx(ctx)
	idle, err := s.cfg.AgentProbe.Idle(cctx, acc)
	cancel()
	if err != nil {
		return err
	}
	last := s.now().Add(-idle).Truncate(time.Second).UTC()
	unlock, ok := s.locks.tryLock(id)
	if !ok {
		return nil // an action holds it; the next pass reads again
	}
	defer unlock()
	cur, ok := s.feed.Get(id)
	if !ok || cur.State != StateRunning || cur.BoxID != ws.BoxID || !last.After(cur.LastActivityAt.Add(activityTolerance)) {
		return nil
	}
	cur.LastActivityAt = last
	_, err = s.feed.Save(ctx, cur)
	return err
}
