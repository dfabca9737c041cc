package db

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/canvasapp/companion/core"
)

var _ core.StreamRelay = (*PGStore)(nil)

// streamChannel is the NOTIFY channel on which replicas relay the stream
// messages that are not stored (retention notices, account statuses) to
// each other, and announce a retention policy's change (the account only:
// the receiver reads the policy from the store). Progress lines travel on feedChannel, with their revision.
const streamChannel = "companion_stream"

// PostgreSQL refuses a NOTIFY payload of 8000 bytes or more. Texts that
// could be long are cut to these many bytes (on a character boundary,
// ending in "…"), which keeps every payload well under the limit.
const (
	maxRelayedProgress = 1024
	maxRelayedMessage  = 2048
	maxPayload         = 7900
)

// relayedProgress follows the revision in a feed notification's payload,
// after a newline, when the saved workspace carries a progress line.
type relayedProgress struct {
	Workspace string `json:"w"`
	Progress  string `json:"p"`
}

// feedPayloadSuffix is what follows the revision in the notification of
// ws's save: nothing, or a newline and its (possibly shortened) progress
// line, so that the other replicas show the line with that revision.
func feedPayloadSuffix(ws core.Workspace) string {
	if ws.Progress == "" {
		return ""
	}
	b, err := json.Marshal(relayedProgress{Workspace: ws.ID, Progress: cut(ws.Progress, maxRelayedProgress)})
	if err != nil {
		return ""
	}
	return "\n" + string(b)
}

// parseFeedPayload reads a feed notification: the revision (0 when the
// payload is not one of ours: read the store's head instead) and the
// progress line announced with it, if any.
func parseFeedPayload(payload string) (int64, *relayedProgress) {
	head, rest, _ := strings.Cut(payload, "\n")
	rev, err := strconv.ParseInt(head, 10, 64)
	if err != nil || rev <= 0 {
		return 0, nil
	}
	if rest == "" {
		return rev, nil
	}
	var p relayedProgress
	if json.Unmarshal([]byte(rest), &p) != nil || p.Workspace == "" {
		return rev, nil
	}
	return rev, &p
}

// relayedMessage is a streamChannel payload. Field names are short: the
// payload is bounded.
type relayedMessage struct {
	Origin string `json:"o"`
	Kind   string `json:"k"`
	// notice
	NoticeKind  string    `json:"nk,omitempty"`
	Owner       string    `json:"ow,omitempty"`
	Workspace   string    `json:"w,omitempty"`
	DeleteAfter time.Time `json:"da,omitzero"`
	// account status
	Account       string    `json:"a,omitempty"`
	State         string    `json:"s,omitempty"`
	ErrorKind     string    `json:"ek,omitempty"`
	Message       string    `json:"m,omitempty"`
	LastOKAt      time.Time `json:"ok,omitzero"`
	NextAttemptAt time.Time `json:"na,omitzero"`
	FlagCode      string    `json:"fc,omitempty"`
	FlagMessage   string    `json:"fm,omitempty"`
	FlagSince     time.Time `json:"fs,omitzero"`
}

// RelayStream sends a notice or an account status to every other process
// sharing the database (see core.StreamRelay), with one NOTIFY on
// streamChannel.
func (s *PGStore) RelayStream(ctx context.Context, m core.Relayed) error {
	payload, err := encodeRelayed(s.listenerName, m)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, streamChannel, payload); err != nil {
		return s.wrap("relay a "+m.Kind+" message", err)
	}
	return nil
}

// ReceiveStream sets the callback of WatchChanges' listener for relayed
// messages (see core.StreamRelay).
func (s *PGStore) ReceiveStream(fn func(core.Relayed)) { s.receive.Store(&fn) }

func encodeRelayed(origin string, m core.Relayed) (string, error) {
	w := relayedMessage{Origin: origin, Kind: m.Kind}
	switch m.Kind {
	case core.RelayNotice:
		w.NoticeKind, w.Owner, w.Workspace, w.DeleteAfter = m.Notice.Kind, m.Notice.Owner, m.Notice.WorkspaceID, m.Notice.DeleteAfter
	case core.RelayPolicy:
		w.Account = m.AccountID
	case core.RelayAccount:
		st := m.Status
		w.Account, w.State, w.ErrorKind, w.Message = m.AccountID, string(st.State), string(st.Kind), cut(st.Message, maxRelayedMessage)
		w.LastOKAt, w.NextAttemptAt = st.LastOKAt, st.NextAttemptAt
		if f := st.Flag; f != nil {
			w.FlagCode, w.FlagMessage, w.FlagSince = f.Code, cut(f.Message, maxRelayedMessage), f.Since
		}
	default:
		return "", fmt.Errorf("db: relay: unknown message kind %q", m.Kind)
	}
	b, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("db: relay a %s message: %w", m.Kind, err)
	}
	if len(b) > maxPayload {
		// Only ids could make it so long: not one of companion's.
		return "", fmt.Errorf("db: relay a %s message: %d bytes is over the %d-byte limit", m.Kind, len(b), maxPayload)
	}
	return string(b), nil
}

// decodeRelayed reads a streamChannel payload; ok is false for one that
// is not a message of a known kind.
func decodeRelayed(payload string) (origin string, m core.Relayed, ok bool) {
	var w relayedMessage
	if json.Unmarshal([]byte(payload), &w) != nil {
		return "", m, false
	}
	m.Kind = w.Kind
	switch w.Kind {
	case core.RelayNotice:
		if w.Owner == "" && w.Workspace == "" {
			return "", m, false
		}
		m.Notice = core.Notice{Kind: w.NoticeKind, Owner: w.Owner, WorkspaceID: w.Workspace, DeleteAfter: w.DeleteAfter}
	case core.RelayPolicy:
		if w.Account == "" {
			return "", m, false
		}
		m.AccountID = w.Account
	case core.RelayAccount:
		if w.Account == "" {
			return "", m, false
		}
		m.AccountID = w.Account
		m.Status = core.AccountStatus{State: core.AccountState(w.State), Kind: core.ErrorKind(w.ErrorKind), Message: w.Message,
			LastOKAt: w.LastOKAt, NextAttemptAt: w.NextAttemptAt}
		if w.FlagCode != "" {
			m.Status.Flag = &core.AccountFlag{Code: w.FlagCode, Message: w.FlagMessage, Since: w.FlagSince}
		}
	default:
		return "", m, false
	}
	return w.Origin, m, true
}

// deliver hands a notification of either channel to the callbacks:
// a progress line before its revision, so the feed has it when it
// applies the revision; relayed messages of other processes only.
func (s *PGStore) deliver(channel, payload string, notify func(rev int64)) {
	var receive func(core.Relayed)
	if p := s.receive.Load(); p != nil {
		receive = *p
	}
	switch channel {
	case streamChannel:
		origin, m, ok := decodeRelayed(payload)
		if ok && origin != s.listenerName && receive != nil {
			receive(m)
		}
	default:
		rev, p := parseFeedPayload(payload)
		if p != nil && receive != nil {
			receive(core.Relayed{Kind: core.RelayProgress, Rev: rev, WorkspaceID: p.Workspace, Progress: p.Progress})
		}
		notify(rev)
	}
}

// cut shortens s to at most n bytes, on a character boundary, ending in
// "…" when it cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ell = "…"
	i := n - len(ell)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + ell
}
