package core

import (
	"context"
	"sync"
	"time"
)

// progressEvery limits how often progress lines are saved (and streamed):
// a pull reports many times a second.
const progressEvery = time.Second

// progress publishes an action's progress lines on its workspace. After
// stop, lines are dropped, so a late report cannot overwrite the
// action's outcome.
type progress struct {
	s   *Service
	ctx context.Context

	mu      sync.Mutex
	ws      Workspace
	last    time.Time
	stopped bool
}

func (s *Service) newProgress(ctx context.Context, ws Workspace) *progress {
	return &progress{s: s, ctx: ctx, ws: ws}
}

func (p *progress) report(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.s.now()
	if p.stopped || line == p.ws.Progress || (!p.last.IsZero() && now.Sub(p.last) < progressEvery) {
		return
	}
	p.last = now
	ws := p.ws
	ws.Progress = line
	saved, err := p.s.feed.Save(p.ctx, ws)
	if err != nil {
		p.s.log.Warn("could not publish progress", "workspace", ws.ID, "err", err)
		return
	}
	p.ws = saved
}

func (p *progress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
}
