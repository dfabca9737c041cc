package core

import (
	"context"
	"fmt"
)

// SetDeleteExport chooses whether deletes of an account's workspaces need
// a verified export first (DeleteExportRequired, the default) or go ahead
// when the export fails (DeleteExportBestEffort). The change is audited as
// an account change. Deletes already running keep the mode they started
// with.
func (s *Service) SetDeleteExport(ctx context.Context, owner, id string, mode DeleteExportMode) (Account, error) {
	if mode != DeleteExportRequired && mode != DeleteExportBestEffort {
		return Account{}, Errorf(KindInvalid, "delete_export must be %q or %q, not %q", DeleteExportRequired, DeleteExportBestEffort, mode)
	}
	s.accountMu.Lock()
	defer s.accountMu.Unlock()
	acct, err := s.Account(ctx, owner, id)
	if err != nil {
		return Account{}, err
	}
	was := acct.DeleteExport.Effective()
	if was == mode {
		return acct, nil
	}
	acct.DeleteExport = mode
	if mode == DeleteExportRequired {
		acct.DeleteExport = "" // the zero value, as the store reads it back
	}
	if err := s.cfg.Store.PutAccount(ctx, acct); err != nil {
		return Account{}, err
	}
	s.log.Info("account delete export mode changed", "account", acct.ID, "from", was, "to", mode)
	s.audit(ctx, AuditEntry{Owner: acct.Owner, Actor: ActorOf(ctx, ActorRecovery), Action: AuditAccountChange,
		AccountID: acct.ID, Provider: acct.Provider, Outcome: fmt.Sprintf("ok (delete_export: %s → %s)", was, mode)})
	return acct, nil
}
