package db

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/canvasapp/companion/core"
)

const (
	auditCols   = `id, at, owner, actor, action, workspace_id, account_id, provider, outcome, export_sha256, prev_hash, hash`
	qAuditLast  = `SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1`
	qAuditAdd   = `INSERT INTO audit (` + auditCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qAuditHead  = `UPDATE meta SET value = ? WHERE key = 'audit_head'`
	qAuditPage  = `SELECT ` + auditCols + ` FROM audit WHERE owner = ? AND id < ? ORDER BY id DESC LIMIT ?`
	qAuditAll   = `SELECT ` + auditCols + ` FROM audit ORDER BY id`
	qAuditHeadR = `SELECT value FROM meta WHERE key = 'audit_head'`
)

// AppendAudit chains e to the newest entry and stores it. The id, the
// previous hash and the head are read and written in one write
// transaction, so concurrent appends cannot fork the chain.
func (s *Store) AppendAudit(ctx context.Context, e core.AuditEntry) (core.AuditEntry, error) {
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
	err := s.write(ctx, "append audit entry "+e.Action, func(t txn) error {
		var last int64
		var prev string
		if err := t.queryRow(qAuditLast).Scan(&last, &prev); err != nil && err != sql.ErrNoRows {
			return err
		}
		e.ID, e.PrevHash = last+1, prev
		e.Hash = core.AuditHash(prev, e)
		if _, err := t.exec(qAuditAdd, e.ID, at, e.Owner, e.Actor, e.Action, e.WorkspaceID, e.AccountID,
			e.Provider, e.Outcome, e.ExportSHA256, e.PrevHash, e.Hash); err != nil {
			return err
		}
		_, err := t.exec(qAuditHead, e.ID)
		return err
	})
	return e, err
}

// ListAudit pages owner's entries newest first, below before (0: newest).
func (s *Store) ListAudit(ctx context.Context, owner string, before int64, limit int) ([]core.AuditEntry, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	out := []core.AuditEntry{}
	err := s.read(ctx, "list audit entries", func(t txn) error {
		rows, err := t.query(qAuditPage, owner, before, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanAudit(rows)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	return out, err
}

func scanAudit(r scanner) (core.AuditEntry, error) {
	var e core.AuditEntry
	var at sql.NullInt64
	err := r.Scan(&e.ID, &at, &e.Owner, &e.Actor, &e.Action, &e.WorkspaceID, &e.AccountID, &e.Provider,
		&e.Outcome, &e.ExportSHA256, &e.PrevHash, &e.Hash)
	e.At = timeOf(at)
	return e, err
}

// AuditBreak is where the audit chain first fails to verify.
type AuditBreak struct {
	// ID is the first row that does not verify (for a missing tail, the
	// newest row the head says should exist).
	ID     int64
	Reason string
}

func (b *AuditBreak) Error() string {
	return fmt.Sprintf("audit entry %d: %s", b.ID, b.Reason)
}

// auditRows is the rows of qAuditAll, from either engine.
type auditRows interface {
	scanner
	Next() bool
	Err() error
}

// verifyAuditRows checks the chain row by row against head, the recorded
// newest id. It returns how many entries verified and the first break, if
// any; err is a read failure.
func verifyAuditRows(rows auditRows, head int64) (n int, brk *AuditBreak, err error) {
	prev, want := "", int64(1)
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return n, nil, err
		}
		if brk := checkAuditRow(e, prev, want); brk != nil {
			return n, brk, nil
		}
		prev, want = e.Hash, e.ID+1
		n++
	}
	if err := rows.Err(); err != nil {
		return n, nil, err
	}
	if last := want - 1; last != head {
		if last > head {
			return n, &AuditBreak{ID: last, Reason: fmt.Sprintf("entries up to %d exist but the recorded head is %d: the head was edited", last, head)}, nil
		}
		return n, &AuditBreak{ID: head, Reason: fmt.Sprintf("the newest entry should be %d but the trail ends at %d: entries were removed from its end", head, last)}, nil
	}
	return n, nil, nil
}

// VerifyAudit walks the whole chain in id order, recomputing every hash.
// It returns how many entries verified and, if the chain is broken, an
// *AuditBreak naming the first bad row. Other errors are read failures.
func (s *Store) VerifyAudit(ctx context.Context) (int, error) {
	n := 0
	var brk *AuditBreak
	err := s.read(ctx, "verify the audit trail", func(t txn) error {
		var head int64
		if err := t.queryRow(qAuditHeadR).Scan(&head); err != nil {
			return err
		}
		rows, err := t.query(qAuditAll)
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

func checkAuditRow(e core.AuditEntry, prev string, want int64) *AuditBreak {
	switch {
	case e.ID != want:
		return &AuditBreak{ID: e.ID, Reason: fmt.Sprintf("expected entry %d next: entry %d was removed or the ids were changed", want, want)}
	case e.PrevHash != prev:
		return &AuditBreak{ID: e.ID, Reason: "its prev_hash does not match the entry before it: a row was removed, reordered or edited"}
	case core.AuditHash(prev, e) != e.Hash:
		return &AuditBreak{ID: e.ID, Reason: "its content does not match its hash: the row was edited"}
	}
	return nil
}
