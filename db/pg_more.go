package db

import (
	"context"
	"time"

	"github.com/canvasapp/companion/core"

	"github.com/jackc/pgx/v5"
)

// AppendAudit chains e to the newest entry and stores it. The head row is
// locked first, so appends from several replicas queue and cannot fork
// the chain.
func (s *PGStore) AppendAudit(ctx context.Context, e core.AuditEntry) (core.AuditEntry, error) {
	if e.Action == "" || e.Actor == "" {
		return e, core.Errorf(core.KindInvalid, "an audit entry needs an action and an actor")
	}
	var en enc
	at := en.time("at", e.At)
	if en.err != nil {
		return e, en.err
	}
	if at == nil {
		return e, core.Errorf(core.KindInvalid, "an audit entry needs a time")
	}
	e.At = e.At.UTC()
	err := s.write(ctx, "append audit entry "+e.Action, func(tx pgx.Tx) error {
		var head int64
		if err := tx.QueryRow(ctx, `SELECT value FROM meta WHERE key = 'audit_head' FOR UPDATE`).Scan(&head); err != nil {
			return err
		}
		var last int64
		var prev string
		if err := tx.QueryRow(ctx, qAuditLast).Scan(&last, &prev); err != nil && !isNoRows(err) {
			return err
		}
		e.ID, e.PrevHash = last+1, prev
		e.Hash = core.AuditHash(prev, e)
		if _, err := tx.Exec(ctx, pgText(qAuditAdd), e.ID, at, e.Owner, e.Actor, e.Action, e.WorkspaceID, e.AccountID,
			e.Provider, e.Outcome, e.ExportSHA256, e.PrevHash, e.Hash); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE meta SET value = $1 WHERE key = 'audit_head'`, e.ID)
		return err
	})
	return e, err
}

// ListAudit pages owner's entries newest first, below before (0: newest).
func (s *PGStore) ListAudit(ctx context.Context, owner string, before int64, limit int) ([]core.AuditEntry, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := s.pool.Query(ctx, pgText(qAuditPage), owner, before, limit)
	if err != nil {
		return nil, s.wrap("list audit entries", err)
	}
	out, err := pgScanAll(rows, scanAudit)
	if err != nil {
		return nil, s.wrap("list audit entries", err)
	}
	if out == nil {
		out = []core.AuditEntry{}
	}
	return out, nil
}

// VerifyAudit walks the whole chain in id order, as Store.VerifyAudit.
func (s *PGStore) VerifyAudit(ctx context.Context) (int, error) {
	n := 0
	var brk *AuditBreak
	err := s.read(ctx, "verify the audit trail", func(tx pgx.Tx) error {
		var head int64
		if err := tx.QueryRow(ctx, qAuditHeadR).Scan(&head); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, qAuditAll)
		if err != nil {
			return err
		}
		defer rows.Close()
		n, brk, err = verifyAuditRows(rows, head)
		return err
	})
	if err != nil {
		return n, err
	}
	if brk != nil {
		return n, brk
	}
	return n, nil
}

// PutExport inserts or updates an export record; see Store.PutExport.
func (s *PGStore) PutExport(ctx context.Context, e core.ExportRecord) error {
	args, err := exportArgs(e)
	if err != nil {
		return err
	}
	return s.write(ctx, "put export "+e.ID, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, pgText(qPutExport), args...)
		return err
	})
}

// GetExport returns one export record.
func (s *PGStore) GetExport(ctx context.Context, id string) (core.ExportRecord, error) {
	e, err := scanExport(s.pool.QueryRow(ctx, pgText(qGetExport), id))
	if isNoRows(err) {
		return e, notFound("export", id)
	}
	if err != nil {
		return e, s.wrap("get export "+id, err)
	}
	return e, nil
}

// ExportsToExpire returns what an account's export retention acts on;
// see Store.ExportsToExpire.
func (s *PGStore) ExportsToExpire(ctx context.Context, accountID string, madeBefore time.Time, limit int) ([]core.ExportRecord, error) {
	out := []core.ExportRecord{}
	for _, q := range expiryQueries(accountID, madeBefore) {
		if len(out) >= limit {
			break
		}
		rows, err := s.pool.Query(ctx, pgText(q.sql), append(q.args, limit-len(out))...)
		if err != nil {
			return nil, s.wrap("list the exports to expire of account "+accountID, err)
		}
		got, err := pgScanAll(rows, scanExport)
		if err != nil {
			return nil, s.wrap("list the exports to expire of account "+accountID, err)
		}
		out = append(out, got...)
	}
	return out, nil
}

// ListExports returns a workspace's export records, newest first.
func (s *PGStore) ListExports(ctx context.Context, workspaceID string) ([]core.ExportRecord, error) {
	rows, err := s.pool.Query(ctx, pgq().listExports, workspaceID)
	if err != nil {
		return nil, s.wrap("list exports of "+workspaceID, err)
	}
	out, err := pgScanAll(rows, scanExport)
	if err != nil {
		return nil, s.wrap("list exports of "+workspaceID, err)
	}
	if out == nil {
		out = []core.ExportRecord{}
	}
	return out, nil
}

// ListOwnerExports returns owner's export records newest first; see
// Store.ListOwnerExports. The cursor's time and the page are read in one
// snapshot.
func (s *PGStore) ListOwnerExports(ctx context.Context, owner, before string, limit int) ([]core.ExportRecord, error) {
	if err := checkOwnerPage(limit); err != nil {
		return nil, err
	}
	var out []core.ExportRecord
	err := s.read(ctx, "list the exports of "+owner, func(tx pgx.Tx) error {
		var rows pgx.Rows
		var err error
		if before == "" {
			rows, err = tx.Query(ctx, pgq().ownerExports, owner, limit)
		} else {
			var at int64
			if err := tx.QueryRow(ctx, pgText(qExportCursor), before, owner).Scan(&at); isNoRows(err) {
				return badCursor(before)
			} else if err != nil {
				return err
			}
			rows, err = tx.Query(ctx, pgq().ownerExportsBefore, owner, at, at, before, limit)
		}
		if err != nil {
			return err
		}
		out, err = pgScanAll(rows, scanExport)
		return err
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []core.ExportRecord{}
	}
	return out, nil
}

// UnfinishedExports returns every running export record, oldest first.
func (s *PGStore) UnfinishedExports(ctx context.Context) ([]core.ExportRecord, error) {
	rows, err := s.pool.Query(ctx, pgText(qUnfinishedExports))
	if err != nil {
		return nil, s.wrap("list unfinished exports", err)
	}
	out, err := pgScanAll(rows, scanExport)
	if err != nil {
		return nil, s.wrap("list unfinished exports", err)
	}
	if out == nil {
		out = []core.ExportRecord{}
	}
	return out, nil
}

// GiveExports changes the owner of a workspace's export records; see
// Store.GiveExports.
func (s *PGStore) GiveExports(ctx context.Context, workspaceID, from, to string) (int, error) {
	var n int64
	err := s.write(ctx, "give the exports of "+workspaceID, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, pgText(qGiveExports), to, workspaceID, from)
		n = tag.RowsAffected()
		return err
	})
	return int(n), err
}

// PutModulePin records (or replaces) the pin of module name, without
// bytes: a replaced pin's old bytes are dropped (see PutModule).
func (s *PGStore) PutModulePin(ctx context.Context, name, sha256 string, manifest []byte) error {
	if name == "" || sha256 == "" {
		return core.Errorf(core.KindInvalid, "a module pin needs a name and a hash")
	}
	return s.putPin(ctx, "pin module "+name, name, sha256, manifest, nil)
}

// ModulePin returns the pinned hash and manifest of module name.
func (s *PGStore) ModulePin(ctx context.Context, name string) (sha256 string, manifest []byte, err error) {
	err = s.pool.QueryRow(ctx, `SELECT sha256, manifest FROM module_pins WHERE name = $1`, name).Scan(&sha256, &manifest)
	if isNoRows(err) {
		return "", nil, notFound("module", name)
	}
	if err != nil {
		return "", nil, s.wrap("read pin of module "+name, err)
	}
	return sha256, manifest, nil
}

// ListModulePins returns the names of the pinned modules, sorted.
func (s *PGStore) ListModulePins(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT name FROM module_pins ORDER BY name COLLATE "C"`)
	if err != nil {
		return nil, s.wrap("list module pins", err)
	}
	names, err := pgScanAll(rows, func(r scanner) (n string, err error) { return n, r.Scan(&n) })
	if err != nil {
		return nil, s.wrap("list module pins", err)
	}
	return names, nil
}

// DeleteModulePin removes the pin of module name; KindNotFound if none.
func (s *PGStore) DeleteModulePin(ctx context.Context, name string) error {
	return s.execOne(ctx, "unpin module "+name, notFound("module", name), `DELETE FROM module_pins WHERE name = $1`, name)
}
