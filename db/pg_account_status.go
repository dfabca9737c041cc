package db

import (
	"context"
	"database/sql"
	"time"

	"github.com/canvasapp/companion/core"
)

var _ core.SharedAccountStatus = (*PGStore)(nil)

// PutAccountStatus records the reconciler's status of an account for the
// other replicas; an account removed meanwhile is left alone.
func (s *PGStore) PutAccountStatus(ctx context.Context, accountID string, st core.AccountStatus) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO account_status (account_id, state, kind, message, last_ok_at, next_attempt_at)
		SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM accounts WHERE id = $1)
		ON CONFLICT (account_id) DO UPDATE SET state = excluded.state, kind = excluded.kind, message = excluded.message,
			last_ok_at = excluded.last_ok_at, next_attempt_at = excluded.next_attempt_at`,
		accountID, string(st.State), string(st.Kind), st.Message, timeOrNil(st.LastOKAt), timeOrNil(st.NextAttemptAt))
	if err != nil {
		return s.wrap("save status of account "+accountID, err)
	}
	return nil
}

// AccountStatusShared returns the status another replica recorded for an
// account, with the account's flag as the flags table holds it now; ok is
// false when no replica recorded one.
func (s *PGStore) AccountStatusShared(ctx context.Context, accountID string) (st core.AccountStatus, ok bool, err error) {
	var state, kind string
	var lastOK, next *time.Time
	var flagCode, flagMessage *string // nil when the account has no flag (the columns are NOT NULL)
	var flagSince sql.NullInt64
	err = s.pool.QueryRow(ctx, `SELECT s.state, s.kind, s.message, s.last_ok_at, s.next_attempt_at, f.code, f.message, f.since
		FROM account_status s LEFT JOIN account_flags f ON f.account_id = s.account_id WHERE s.account_id = $1`,
		accountID).Scan(&state, &kind, &st.Message, &lastOK, &next, &flagCode, &flagMessage, &flagSince)
	if isNoRows(err) {
		return core.AccountStatus{}, false, nil
	}
	if err != nil {
		return core.AccountStatus{}, false, s.wrap("read status of account "+accountID, err)
	}
	st.State, st.Kind = core.AccountState(state), core.ErrorKind(kind)
	if lastOK != nil {
		st.LastOKAt = lastOK.UTC()
	}
	if next != nil {
		st.NextAttemptAt = next.UTC()
	}
	if flagCode != nil {
		st.Flag = &core.AccountFlag{Code: *flagCode, Message: *flagMessage, Since: timeOf(flagSince)}
	}
	return st, true, nil
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
