package core

import (
	"context"
	"fmt"
)

// startFoundBox finishes a create that an earlier attempt began: after a
// crash (kill -9 between the provider's "create" and "start", as the
// Docker Engine has them) the box found by its label may exist but never
// have been started. A create means a running box, so it is started here
// (the journal step provider_start) rather than left looking paused, which
// nobody asked for. A box that cannot be started comes back with the
// error, and the workspace ends in state error with the reason.
func (s *Service) startFoundBox(ctx context.Context, op *Op, box Box, acct Account, p Provider, info ProviderInfo) (Box, error) {
	if box.State != StatePaused {
		return box, nil
	}
	if !info.Capabilities.Suspend {
		return box, Errorf(KindUnavailable, "an interrupted create left box %s stopped, and provider %s cannot start it: delete the workspace and create it again", box.ID, info.Name)
	}
	s.log.Info("an interrupted create left its box stopped; starting it", "workspace", op.WorkspaceID, "box", box.ID)
	started := box
	err := s.retry(ctx, op, s.budgetFor(acct, p), "provider_start", func(ctx context.Context) error {
		b, err := p.Resume(ctx, acct, box.ID)
		if err == nil {
			started = b
		}
		return err
	})
	if err != nil {
		return box, &Error{Kind: KindOf(err), Message: fmt.Sprintf("an interrupted create left box %s stopped, and starting it failed: %s", box.ID, messageOf(err)), Err: err}
	}
	if started.ID == "" {
		started.ID = box.ID
	}
	return started, nil
}
