package core

import (
	"context"
	"fmt"
)

// failInterrupted fails export record e, which a process that stopped
// left running, with reason, and tells its owner (export.failed). The
// event is stored first: its id is stable, so a crash before the record
// is failed only has the next recovery store it again, which the sink
// ignores, whereas failing first could lose it, since a failed record is
// never recovered again.
func (s *Service) failInterrupted(ctx context.Context, store ExportStore, e ExportRecord, reason string) error {
	e.State, e.Verified, e.Error, e.UpdatedAt = ExportFailed, false, reason, s.now()
	s.emit(ctx, exportFailedEvent(e, e.workspace()))
	if err := store.PutExport(ctx, e); err != nil {
		return fmt.Errorf("fail unfinished export %s: %w", e.ID, err)
	}
	return nil
}

// exportFailedEvent is the export.failed event of failed record rec, an
// export of ws.
func exportFailedEvent(rec ExportRecord, ws Workspace) Event {
	return Event{ID: EventID(EventExportFailed, rec.ID), Kind: EventExportFailed, Owner: ws.Owner, AccountID: ws.AccountID,
		WorkspaceID: ws.ID, WorkspaceName: ws.Name, Provider: ws.Provider, ExportID: rec.ID, Reason: rec.Error}
}

// workspace is the workspace e is of, as the record names it: the record
// took its owner, account, name and provider from the workspace when the
// export began (GiveExports keeps the owner in step since), so it serves
// when the workspace is gone as well.
func (e ExportRecord) workspace() Workspace {
	return Workspace{ID: e.WorkspaceID, Owner: e.Owner, AccountID: e.AccountID, Name: e.WorkspaceName, Provider: e.Provider}
}
