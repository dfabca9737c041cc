package core

import (
	"context"
	"fmt"
	"time"
)

// leftoverLookup bounds the one look for a box a failed create may have
// left: deleting a record with no box must answer at once, even when the
// provider is unreachable.
const leftoverLookup = 5 * time.Second

// acquireForDelete is acquire for delete and its preview. A workspace with
// no box (its create failed) needs nothing from its provider to be
// removed, so an adapter that is missing or cannot describe itself leaves
// p nil instead of failing.
func (s *Service) acquireForDelete(ctx context.Context, owner, id string) (ws Workspace, acct Account, p Provider, info ProviderInfo, unlock func(), err error) {
	return s.lockAndLoad(ctx, owner, id, true)
}

// leftoverBox looks once, briefly, for a box labelled with ws's id: a
// create whose answer was lost may have made one that bills. A lookup
// that fails does not stop the delete; it is logged, and such a box would
// be listed by the reconciler later and shown as an adopted workspace, so
// it is not lost from view.
func (s *Service) leftoverBox(ctx context.Context, ws Workspace, acct Account, p Provider, info ProviderInfo) (Box, bool) {
	if p == nil || !info.Capabilities.List {
		return Box{}, false
	}
	lctx, cancel := s.timeout(ctx, leftoverLookup)
	defer cancel()
	box, ok, err := findByLabel(lctx, p, acct, ws.ID)
	if err != nil {
		s.log.Warn("could not look for a box left by a failed create; removing the record anyway (the reconciler adopts such a box if it exists)",
			"workspace", ws.ID, "account", acct.ID, "label", LabelWorkspace+"="+ws.ID, "err", messageOf(err))
		return Box{}, false
	}
	return box, ok
}

// noBoxConsequences words the delete of a workspace that never got a box.
func noBoxConsequences(ws Workspace) (lost, survives []string) {
	why := "its create did not finish"
	if ws.Error != "" {
		why = ws.Error
	}
	lost = []string{fmt.Sprintf("companion's record of this workspace; it has no box at %s (%s), so no files are lost", ws.Provider, why)}
	survives = []string{fmt.Sprintf("nothing at %s is touched, unless a box labelled with this workspace's id turns up there: that one is deleted too", ws.Provider)}
	return lost, survives
}
