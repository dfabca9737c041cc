// Package auth is serve mode's idea of who is asking: users, login
// sessions and personal API tokens. It holds the rules (argon2id password
// hashes, session expiry, token hashing, failed-login limits); the SQL is
// in db, and HTTP is in ui-bridge.
//
// A user is keyed by (issuer, subject), never by a display name or email:
// local users have IssuerLocal and their name as subject, users a trusted
// ingress names have IssuerProxy, and an OpenID Connect login plugs in
// with its issuer URL. Sessions do not depend on how the user signed in.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"time"

	"github.com/canvasapp/companion/core"
)

// Issuers of the built-in login methods.
const (
	IssuerLocal = "local"
	IssuerProxy = "proxy"
)

// User is one person who can sign in. ID is what owner columns hold.
type User struct {
	ID      string
	Issuer  string
	Subject string
	Name    string
	Admin   bool
	// PasswordHash is a PHC string (see HashPassword); "" means the user
	// cannot sign in with a password.
	PasswordHash string
	CreatedAt    time.Time
}

// Session is a login. Only the SHA-256 of the id the cookie carries is
// stored.
type Session struct {
	IDHash     string
	UserID     string
	Method     string
	CreatedAt  time.Time
	LastSeenAt time.Time
	ExpiresAt  time.Time // absolute expiry
}

// Token is a personal API token's record; the token itself is shown once.
type Token struct {
	ID     string
	Hash   string
	UserID string
	Label  string
	// Scope limits what the token may do: "" is everything its user
	// may, ScopeMetrics reading the metrics only.
	Scope      string
	CreatedAt  time.Time
	ExpiresAt  time.Time // zero: never
	LastUsedAt time.Time // zero: never used
}

// Store keeps users, sessions and tokens (db.Store implements it). Unknown
// ids are core.KindNotFound errors.
type Store interface {
	// CreateUser inserts u; when no user exists yet it makes u an admin,
	// in the same transaction, so the first user is always one. A taken
	// (issuer, subject) is core.KindConflict.
	CreateUser(ctx context.Context, u User) (User, error)
	UserByID(ctx context.Context, id string) (User, error)
	UserBySubject(ctx context.Context, issuer, subject string) (User, error)
	ListUsers(ctx context.Context) ([]User, error)
	// DeleteUser removes the user with their sessions and tokens.
	DeleteUser(ctx context.Context, id string) error
	// SetPassword replaces the hash and ends every session of the user in
	// the same transaction.
	SetPassword(ctx context.Context, id, hash string) error
	PutSession(ctx context.Context, s Session) error
	// SessionUser returns the session with idHash and its user.
	SessionUser(ctx context.Context, idHash string) (Session, User, error)
	TouchSession(ctx context.Context, idHash string, at time.Time) error
	DeleteSession(ctx context.Context, idHash string) error
	// DeleteExpiredSessions removes sessions whose absolute expiry or
	// idle deadline (last seen before idleBefore) has passed.
	DeleteExpiredSessions(ctx context.Context, now, idleBefore time.Time) (int, error)
	PutToken(ctx context.Context, t Token) error
	TokenUser(ctx context.Context, hash string) (Token, User, error)
	TouchToken(ctx context.Context, id string, at time.Time) error
	ListTokens(ctx context.Context, userID string) ([]Token, error)
	// DeleteToken removes userID's token id; another user's is not found.
	DeleteToken(ctx context.Context, userID, id string) error

	// The failed-login counts, shared by every process on the store.
	// LoginFailures returns the windows of keys still open at now (ending
	// after it) and until when knownKey is known (zero: never marked).
	LoginFailures(ctx context.Context, now time.Time, keys []string, knownKey string) (map[string]FailureWindow, time.Time, error)
	// AddLoginFailure counts one failure for each key, atomically: a key
	// with no window open at now opens one ending at now + its Window.
	// It also drops a bounded batch of ended rows.
	AddLoginFailure(ctx context.Context, now time.Time, keys []FailureKey) error
	// LoginSucceeded deletes clearKey's window and marks knownKey known
	// until until, dropping a bounded batch of lapsed known marks.
	LoginSucceeded(ctx context.Context, now time.Time, clearKey, knownKey string, until time.Time) error
}

// Secret prefixes make a leaked value recognisable (and greppable by
// secret scanners) and let the gate tell a token from other bearers.
const (
	sessionPrefix = "cps_"
	tokenPrefix   = "cpt_"
)

// newSecret returns prefix + 32 random bytes, base64url.
func newSecret(prefix string) string {
	var b [32]byte
	rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// NewID returns a random id with prefix, for rows.
func NewID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// HashSecret is the SHA-256 (hex) stored for a session id or API token.
// Both are 256 random bits, so a fast hash is enough: there is nothing to
// guess.
func HashSecret(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func notFound(format string, args ...any) error {
	return core.Errorf(core.KindNotFound, format, args...)
}
