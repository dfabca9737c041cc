package core

import (
	"context"
	"fmt"
)

// Adoption limits. A provider's list is untrusted input (a Wasm module
// can return anything), so what one list can add to the store is bounded.
const (
	// AdoptPerPass is how many unknown boxes one pass over one account
	// adopts; the rest wait for later passes.
	AdoptPerPass = 25
	// InventPasses is how many passes in a row must each list more than
	// AdoptPerPass box ids the account's previous list did not have before
	// the account is flagged FlagInventingBoxes and adoption stops for it.
	InventPasses = 3
	// CalmPassesToClear is how many passes in a row without that must
	// follow before the flag is lowered and adoption resumes.
	CalmPassesToClear = 40
)

// adoptionAllowance compares this list with the account's previous one,
// raises or lowers the invention flag, and returns how many unknown boxes
// this pass may adopt. known are the boxes already tracked by a workspace.
func (s *Service) adoptionAllowance(ctx context.Context, acct Account, listed map[string]bool, known map[string]Workspace) int {
	a := s.status
	a.mu.Lock()
	t := a.trackLocked(acct.ID)
	prev := t.listed
	t.listed = listed
	if prev == nil {
		// The first list since start is the baseline: nothing to compare.
		flagged := t.status.Flag != nil
		a.mu.Unlock()
		if flagged {
			return 0
		}
		return AdoptPerPass
	}
	fresh := 0
	for id := range listed {
		if !prev[id] && known[id].ID == "" {
			fresh++
		}
	}
	var raise, lower bool
	if fresh > AdoptPerPass {
		t.streak++
		t.calm = 0
		raise = t.streak >= InventPasses && t.status.Flag == nil
	} else {
		t.streak = 0
		if t.status.Flag != nil {
			t.calm++
			lower = t.calm >= CalmPassesToClear
		}
	}
	flagged := t.status.Flag != nil
	a.mu.Unlock()

	switch {
	case raise:
		f := &AccountFlag{
			Code: FlagInventingBoxes,
			Message: fmt.Sprintf("%s listed more than %d boxes it had never listed before in %d passes in a row; companion stopped adopting its boxes until it calms down (%d quiet passes) — check the provider module",
				acct.Provider, AdoptPerPass, InventPasses, CalmPassesToClear),
			Since: s.now(),
		}
		if err := s.cfg.Store.SetAccountFlag(ctx, acct.ID, f); err != nil {
			s.log.Warn("could not record the account's flag", "account", acct.ID, "err", err)
		}
		s.setStatus(acct, func(st *AccountStatus) { st.Flag = f })
		s.log.Warn("provider keeps inventing boxes; adoption stopped for the account", "account", acct.ID, "provider", acct.Provider, "new_ids", fresh)
		return 0
	case lower:
		if err := s.cfg.Store.SetAccountFlag(ctx, acct.ID, nil); err != nil {
			s.log.Warn("could not clear the account's flag", "account", acct.ID, "err", err)
		}
		a.mu.Lock()
		t.calm = 0
		a.mu.Unlock()
		s.setStatus(acct, func(st *AccountStatus) { st.Flag = nil })
		s.log.Info("provider calmed down; adoption resumes for the account", "account", acct.ID, "provider", acct.Provider)
		return AdoptPerPass
	case flagged:
		return 0
	}
	return AdoptPerPass
}
