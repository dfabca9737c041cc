package core

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Budgeter is implemented by adapters that bound how long one action
// (create, pause, resume, delete) may take in total, every attempt and
// every wait between attempts included. A Wasm module's budget follows
// from its call timeout.
type Budgeter interface {
	ActionBudget() time.Duration
}

// budget is the deadline one action's attempts share.
type budget struct {
	provider string
	limit    time.Duration
	// own is set when the adapter declared the budget; it then bounds its
	// calls itself and ActionTimeout does not cut each attempt.
	own bool
}

// budgetFor returns the budget of an action on p: the adapter's own, at
// most Config.ActionBudget.
func (s *Service) budgetFor(acct Account, p Provider) budget {
	b := budget{provider: acct.Provider, limit: s.cfg.ActionBudget}
	if bp, ok := p.(Budgeter); ok {
		if d := bp.ActionBudget(); d > 0 {
			b.limit, b.own = min(d, b.limit), true
		}
	}
	return b
}

// attemptCtx bounds one attempt inside the action's deadline.
func (s *Service) attemptCtx(bctx context.Context, b budget) (context.Context, context.CancelFunc) {
	if b.own {
		return context.WithCancel(bctx)
	}
	return s.timeout(bctx, s.cfg.ActionTimeout)
}

// budgetError says that an action ran out of its budget: which provider,
// which operation, after how many attempts, and the last failure.
func budgetError(b budget, step string, attempts int, last error, why string) error {
	op := strings.TrimPrefix(step, "provider_")
	msg := fmt.Sprintf("provider %s: %s ran out of its action budget of %s after %d attempt(s)", b.provider, op, b.limit.Round(time.Millisecond), attempts)
	if why != "" {
		msg += " " + why
	}
	if last != nil {
		msg += "; last error: " + messageOf(last)
	}
	return &Error{Kind: KindUnavailable, Message: msg, Err: last}
}
