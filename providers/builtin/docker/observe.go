package docker

import (
	"context"
	"time"

	"github.com/canvasapp/companion/core"
)

// observe tells Config.Observe about a call that started at start.
func (p *Provider) observe(op string, start time.Time, err error) {
	if o := p.cfg.Observe; o != nil {
		o(op, time.Since(start), err)
	}
}

// List returns every box of this provider's scope, with state, URL, key,
// labels and what the engine reports of size and activity.
func (p *Provider) List(ctx context.Context, acct core.Account) ([]core.Box, error) {
	start := time.Now()
	boxes, err := p.doList(ctx, acct)
	p.observe("list", start, err)
	return boxes, err
}

// Get returns one box of this scope; KindNotFound when the container is
// gone or is not one of this scope's boxes.
func (p *Provider) Get(ctx context.Context, acct core.Account, boxID string) (core.Box, error) {
	start := time.Now()
	b, err := p.doGet(ctx, acct, boxID)
	p.observe("get", start, err)
	return b, err
}

// Create makes a box (see doCreate).
func (p *Provider) Create(ctx context.Context, acct core.Account, spec core.CreateSpec) (core.Box, error) {
	start := time.Now()
	b, err := p.doCreate(ctx, acct, spec)
	p.observe("create", start, err)
	return b, err
}

// Suspend pauses a box (see doSuspend).
func (p *Provider) Suspend(ctx context.Context, acct core.Account, boxID string) (core.Box, error) {
	start := time.Now()
	b, err := p.doSuspend(ctx, acct, boxID)
	p.observe("suspend", start, err)
	return b, err
}

// Resume wakes a box (see doResume).
func (p *Provider) Resume(ctx context.Context, acct core.Account, boxID string) (core.Box, error) {
	start := time.Now()
	b, err := p.doResume(ctx, acct, boxID)
	p.observe("resume", start, err)
	return b, err
}

// Delete destroys a box (see doDelete).
func (p *Provider) Delete(ctx context.Context, acct core.Account, boxID string) error {
	start := time.Now()
	err := p.doDelete(ctx, acct, boxID)
	p.observe("delete", start, err)
	return err
}
