package webhooks

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/canvasapp/companion/core"
)

// KeepPath is where a retention warning's keep link points: POST
// KeepPath+token keeps the workspace. It is outside /v1/ because the
// token is its own credential, good for this one thing only.
const KeepPath = "/keep/"

// keepKeyName is the secret store entry of the key keep links are signed
// with.
const keepKeyName = "webhooks/keep-link-key"

// ActorKeepLink names keeps made through a link in the audit trail.
const ActorKeepLink = "keep link"

// keepKey returns the key keep links are signed with, making it on first
// use. It is read back after it is made, so two replicas that make one at
// the same moment both end up with whichever was stored last.
func (h *Hooks) keepKey(ctx context.Context, create bool) ([]byte, error) {
	v, err := h.cfg.Secrets.Get(ctx, keepKeyName)
	if core.IsKind(err, core.KindNotFound) && create {
		var b [32]byte
		rand.Read(b[:])
		if err = h.cfg.Secrets.Set(ctx, keepKeyName, base64.RawURLEncoding.EncodeToString(b[:])); err == nil {
			v, err = h.cfg.Secrets.Get(ctx, keepKeyName)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the keep links' key: %w", err)
	}
	return base64.RawURLEncoding.DecodeString(v)
}

func keepMAC(key []byte, claims string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("companion keep link v1\x00")) // this key signs nothing else
	m.Write([]byte(claims))
	return m.Sum(nil)
}

// keepToken makes the token of a link that keeps owner's workspace from
// its delete at deleteAfter. It expires at that delete.
func (h *Hooks) keepToken(ctx context.Context, owner, workspaceID string, deleteAfter time.Time) (string, time.Time, error) {
	key, err := h.keepKey(ctx, true)
	if err != nil {
		return "", time.Time{}, err
	}
	exp := deleteAfter.UTC().Truncate(time.Second)
	claims := strings.Join([]string{workspaceID, owner, strconv.FormatInt(deleteAfter.UnixNano(), 10), strconv.FormatInt(exp.Unix(), 10)}, "\n")
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(claims)) + "." + enc.EncodeToString(keepMAC(key, claims)), exp, nil
}

// KeepLink is what a keep link's token says, once checked.
type KeepLink struct {
	WorkspaceID string
	Owner       string
	DeleteAfter time.Time
	ExpiresAt   time.Time
}

// errBadLink is the one answer to a token that is not valid, whatever is
// wrong with it, so that probing learns nothing.
func errBadLink() error {
	return core.Errorf(core.KindNotFound, "this keep link is not valid: it is malformed, was not issued by this companion, or expired")
}

// CheckKeepLink verifies a keep link's token: signed by this companion
// and not expired at now.
func (h *Hooks) CheckKeepLink(ctx context.Context, token string) (KeepLink, error) {
	enc := base64.RawURLEncoding
	c64, m64, ok := strings.Cut(token, ".")
	if !ok || len(token) > 1024 {
		return KeepLink{}, errBadLink()
	}
	claims, err1 := enc.DecodeString(c64)
	sig, err2 := enc.DecodeString(m64)
	if err1 != nil || err2 != nil {
		return KeepLink{}, errBadLink()
	}
	key, err := h.keepKey(ctx, false)
	if core.IsKind(err, core.KindNotFound) {
		return KeepLink{}, errBadLink()
	}
	if err != nil {
		return KeepLink{}, err
	}
	if !hmac.Equal(sig, keepMAC(key, string(claims))) {
		return KeepLink{}, errBadLink()
	}
	parts := strings.Split(string(claims), "\n")
	if len(parts) != 4 {
		return KeepLink{}, errBadLink()
	}
	da, err1 := strconv.ParseInt(parts[2], 10, 64)
	exp, err2 := strconv.ParseInt(parts[3], 10, 64)
	if err1 != nil || err2 != nil {
		return KeepLink{}, errBadLink()
	}
	l := KeepLink{WorkspaceID: parts[0], Owner: parts[1], DeleteAfter: time.Unix(0, da).UTC(), ExpiresAt: time.Unix(exp, 0).UTC()}
	if !h.cfg.Now().Before(l.ExpiresAt) {
		return KeepLink{}, errBadLink()
	}
	return l, nil
}

// Keep keeps the workspace a keep link names, if that workspace is still
// scheduled for the delete the link was made for: a link cannot keep a
// workspace from a later schedule, nor do anything else.
func (h *Hooks) Keep(ctx context.Context, token string) (core.Workspace, error) {
	l, err := h.CheckKeepLink(ctx, token)
	if err != nil {
		return core.Workspace{}, err
	}
	svc, err := h.service()
	if err != nil {
		return core.Workspace{}, err
	}
	ws, err := svc.Workspace(l.Owner, l.WorkspaceID)
	if err != nil {
		return core.Workspace{}, core.Errorf(core.KindNotFound, "the workspace this link keeps is gone")
	}
	if ws.Keep {
		return ws, nil // kept already: the same answer twice
	}
	if !ws.DeleteAfter.Equal(l.DeleteAfter) {
		return core.Workspace{}, core.Errorf(core.KindConflict, "the workspace is no longer scheduled for the delete this link was sent about; nothing changed")
	}
	return svc.SetKeep(core.WithActor(ctx, ActorKeepLink), l.Owner, l.WorkspaceID, true)
}
