package uibridge

import (
	"context"
	"time"

	"github.com/canvasapp/companion/core"
)

// A stream outlives the request that opened it: the gate checks the
// credential once, at the handshake. So that signing out, revoking a
// token or removing a user also ends the streams opened with them, each
// stream keeps its credential; an end this process sees (logout, token
// revocation) closes them at once, and every CredentialRecheck the server
// asks the store whether the rest still hold, which catches what other
// processes did (another replica's logout, `companion users remove`) and
// what time did (a session's maximum age, a token's expiry). Such a
// stream closes with CloseSignedOut.

// DefaultCredentialRecheck is Config.CredentialRecheck's default: a
// stream outlives its credential's end elsewhere by at most this long.
const DefaultCredentialRecheck = 15 * time.Second

// credential is what a signed-in request proved itself with.
type credential struct {
	// key names it among its owner's streams: "session:" and the
	// session's hash, "token:" and the token's id, or "user:" and the
	// user's id (an ingress names the user on each request).
	key string
	// check asks whether it still holds. An unauthorized or not_found
	// error means it has ended; any other error means the store could
	// not tell, and the stream stays.
	check func(ctx context.Context) error
}

// credentialEnded reports whether err from credential.check means the
// credential is gone for good.
func credentialEnded(err error) bool {
	return core.IsKind(err, core.KindUnauthorized) || core.IsKind(err, core.KindNotFound)
}

// closeCredentialReason is the close reason of CloseSignedOut.
const closeCredentialReason = "signed out: the session or API token this stream was opened with has ended"

// credentialCheckTimeout bounds one credential's check in a recheck.
const credentialCheckTimeout = 5 * time.Second

// recheckCredentials checks the credentials of open streams every
// CredentialRecheck until the server closes.
func (s *Server) recheckCredentials() {
	for {
		t := s.cfg.Clock.NewTimer(s.cfg.CredentialRecheck)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		s.recheckOnce(s.ctx)
	}
}

// recheckOnce checks each distinct credential of the open streams once
// and closes the streams of those that ended; it returns how many
// streams it closed.
func (s *Server) recheckOnce(ctx context.Context) int {
	closed := 0
	for _, ref := range s.hub.credentials() {
		cctx, cancel := context.WithTimeout(ctx, credentialCheckTimeout)
		err := ref.cred.check(cctx)
		cancel()
		switch {
		case err == nil:
		case credentialEnded(err):
			closed += s.endCredential(ref.owner, ref.cred.key, err.Error())
		case ctx.Err() != nil:
			return closed
		default:
			s.log.Warn("could not recheck a stream's credential; the stream stays open", "user", ref.owner, "err", err)
		}
	}
	return closed
}

// endCredential closes owner's streams opened with the credential key,
// which has ended (why says how), and returns how many there were.
func (s *Server) endCredential(owner, key, why string) int {
	n := s.hub.closeOwner(owner, func(c *client) bool { return c.cred != nil && c.cred.key == key },
		CloseSignedOut, closeCredentialReason)
	if n > 0 {
		s.log.Info("closed streams whose credential ended", "user", owner, "streams", n, "why", why)
	}
	return n
}

// credentialRef is one credential of open streams and their owner.
type credentialRef struct {
	owner string
	cred  *credential
}

// credentials lists the distinct credentials of the attached streams.
func (h *hub) credentials() []credentialRef {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	var out []credentialRef
	for owner, set := range h.clients {
		for c := range set {
			if c.cred == nil || seen[owner+"\x00"+c.cred.key] {
				continue
			}
			seen[owner+"\x00"+c.cred.key] = true
			out = append(out, credentialRef{owner: owner, cred: c.cred})
		}
	}
	return out
}
