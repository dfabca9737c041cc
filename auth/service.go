package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/canvasapp/companion/core"
)

// Config configures a Service. Store is required.
type Config struct {
	Store Store
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// IdleTimeout ends a session not used for this long; 0 means 12 h.
	IdleTimeout time.Duration
	// MaxAge ends a session this long after sign-in however much it is
	// used; 0 means 7 days.
	MaxAge time.Duration
	// Params are the argon2id parameters for new hashes; zero means
	// DefaultParams.
	Params Params
	// Limits are the failed-login limits; zero means DefaultLimits.
	Limits Limits
}

// Service is the login logic. It is safe for concurrent use.
type Service struct {
	store   Store
	now     func() time.Time
	idle    time.Duration
	maxAge  time.Duration
	params  Params
	limiter *limiter

	dummyOnce sync.Once
	dummy     string

	mu    sync.Mutex
	cache map[string]cached // by session id hash
}

// cached is a session the store confirmed at checked.
type cached struct {
	sess    Session
	user    User
	checked time.Time
}

// cacheFor is how long a confirmed session is believed without asking
// the store again. Sign-out and password changes through this process
// drop it at once; a change made by another process (companion users
// passwd or remove while serve runs) takes effect within this time.
const cacheFor = time.Second

// maxCached bounds the cache; past it, it starts over.
const maxCached = 10_000

// touchEvery is how stale a session's last-seen time may get before a
// request writes it: idle expiry is exact to within this, and most
// requests cost a read only.
const touchEvery = time.Minute

// New returns a Service over cfg.Store.
func New(cfg Config) *Service {
	s := &Service{store: cfg.Store, now: cfg.Now, idle: cfg.IdleTimeout, maxAge: cfg.MaxAge, params: cfg.Params}
	if s.now == nil {
		s.now = time.Now
	}
	if s.idle <= 0 {
		s.idle = 12 * time.Hour
	}
	if s.maxAge <= 0 {
		s.maxAge = 7 * 24 * time.Hour
	}
	if s.params == (Params{}) {
		s.params = DefaultParams
	}
	lim := cfg.Limits
	if lim == (Limits{}) {
		lim = DefaultLimits
	}
	s.limiter = &limiter{lim: lim, store: cfg.Store}
	s.cache = map[string]cached{}
	return s
}

func (s *Service) forget(match func(hash string, c cached) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, c := range s.cache {
		if match(h, c) {
			delete(s.cache, h)
		}
	}
}

// MaxAge is the absolute session lifetime (the cookie's Max-Age).
func (s *Service) MaxAge() time.Duration { return s.maxAge }

// CheckName refuses user names that would be confusing in a list or a
// header: 1-64 letters, digits and . _ - @, starting with a letter or digit.
func CheckName(name string) error {
	if name == "" || len(name) > 64 {
		return core.Errorf(core.KindInvalid, "a user name is 1 to 64 characters")
	}
	for i, c := range name {
		ok := unicode.IsLetter(c) || unicode.IsDigit(c) || (i > 0 && strings.ContainsRune("._-@", c))
		if !ok || c > unicode.MaxASCII {
			return core.Errorf(core.KindInvalid, "user name %q: use letters, digits and . _ - @ (ASCII), starting with a letter or digit", name)
		}
	}
	return nil
}

// CheckPassword refuses passwords too short to be worth hashing or too
// long to hash cheaply.
func CheckPassword(pw string) error {
	if len(pw) < 8 {
		return core.Errorf(core.KindInvalid, "a password needs at least 8 characters")
	}
	if len(pw) > maxPasswordLen {
		return core.Errorf(core.KindInvalid, "a password may be at most %d bytes", maxPasswordLen)
	}
	return nil
}

// AddLocalUser creates a local user with a password. The first user of
// the installation becomes an admin whatever admin says.
func (s *Service) AddLocalUser(ctx context.Context, name, password string, admin bool) (User, error) {
	if err := CheckName(name); err != nil {
		return User{}, err
	}
	if err := CheckPassword(password); err != nil {
		return User{}, err
	}
	hash, err := HashPassword(password, s.params)
	if err != nil {
		return User{}, err
	}
	return s.store.CreateUser(ctx, User{ID: NewID("u_"), Issuer: IssuerLocal, Subject: name, Name: name,
		Admin: admin, PasswordHash: hash, CreatedAt: s.now()})
}

// FindUser returns the user a CLI names: a local user called name, or
// else the only user of any issuer with that name.
func (s *Service) FindUser(ctx context.Context, name string) (User, error) {
	u, err := s.store.UserBySubject(ctx, IssuerLocal, name)
	if err == nil || !isNotFound(err) {
		return u, err
	}
	all, err := s.store.ListUsers(ctx)
	if err != nil {
		return User{}, err
	}
	var found []User
	for _, u := range all {
		if u.Name == name {
			found = append(found, u)
		}
	}
	switch len(found) {
	case 0:
		return User{}, notFound("no user %q; companion users list shows them", name)
	case 1:
		return found[0], nil
	}
	return User{}, core.Errorf(core.KindConflict, "several users are called %q; remove the one you do not mean", name)
}

// ListUsers lists every user.
func (s *Service) ListUsers(ctx context.Context) ([]User, error) { return s.store.ListUsers(ctx) }

// User returns the user with id.
func (s *Service) User(ctx context.Context, id string) (User, error) {
	return s.store.UserByID(ctx, id)
}

// UsersExist reports which of ids name existing users, from one read of
// the users. Ids are never reused, so a user that existed once and is
// missing now was removed.
func (s *Service) UsersExist(ctx context.Context, ids []string) (map[string]bool, error) {
	users, err := s.store.ListUsers(ctx)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	exist := map[string]bool{}
	for _, u := range users {
		if want[u.ID] {
			exist[u.ID] = true
		}
	}
	return exist, nil
}

// FirstAdmin returns the admin created first, when there is one: the user
// that what nobody owns is handed over to.
func (s *Service) FirstAdmin(ctx context.Context) (User, bool, error) {
	users, err := s.store.ListUsers(ctx)
	if err != nil {
		return User{}, false, err
	}
	for _, u := range users {
		if u.Admin {
			return u, true, nil
		}
	}
	return User{}, false, nil
}

// RemoveUser deletes a user with their sessions and tokens. Their
// accounts, workspaces and exports stay in the store for the first admin
// to take over (core.Service.HandOverOrphans).
func (s *Service) RemoveUser(ctx context.Context, id string) error {
	err := s.store.DeleteUser(ctx, id)
	// This process stops believing their sessions at once; others (the
	// CLI removed them) within cacheFor.
	s.forget(func(_ string, c cached) bool { return c.user.ID == id })
	return err
}

// SetPassword changes a local user's password and ends all their sessions.
func (s *Service) SetPassword(ctx context.Context, id, password string) error {
	if err := CheckPassword(password); err != nil {
		return err
	}
	hash, err := HashPassword(password, s.params)
	if err != nil {
		return err
	}
	err = s.store.SetPassword(ctx, id, hash)
	s.forget(func(_ string, c cached) bool { return c.user.ID == id })
	return err
}

// ErrBadLogin is the one answer to a wrong user name or a wrong password.
var ErrBadLogin = core.Errorf(core.KindUnauthorized, "wrong user name or password")

// Login checks a local user's password and starts a session. addr is the
// client's address, for the failed-login limits (Limits): behind an
// ingress, the one it names (Ingress.ClientAddr), never the ingress's. It returns the session
// secret for the cookie. An unknown user and a wrong password take the
// same time (a dummy hash is verified) and give ErrBadLogin; too many
// failures give core.KindRateLimited with RetryAfter.
func (s *Service) Login(ctx context.Context, name, password, addr string) (string, User, error) {
	now := s.now()
	keys := keysFor(name, addr)
	wait, known, err := s.limiter.blocked(ctx, now, keys)
	if err != nil {
		return "", User{}, err
	}
	if wait > 0 {
		return "", User{}, &core.Error{Kind: core.KindRateLimited, RetryAfter: wait,
			Message: fmt.Sprintf("too many failed sign-ins; try again in %s", wait.Round(time.Second))}
	}
	u, err := s.store.UserBySubject(ctx, IssuerLocal, name)
	if err != nil && !isNotFound(err) {
		return "", User{}, err
	}
	hash := u.PasswordHash
	if err != nil || hash == "" {
		hash = s.dummyHash()
	}
	ok := VerifyPassword(password, hash) && err == nil && u.PasswordHash != ""
	if !ok {
		// Counted even when the client has gone: hanging up must not
		// make a guess free.
		if err := s.limiter.fail(context.WithoutCancel(ctx), now, keys, known); err != nil {
			return "", User{}, err
		}
		return "", User{}, ErrBadLogin
	}
	if err := s.limiter.succeed(ctx, now, keys); err != nil {
		return "", User{}, err
	}
	secret, err := s.StartSession(ctx, u.ID, IssuerLocal)
	return secret, u, err
}

// dummyHash is verified for unknown users so they cost what a known one
// does.
func (s *Service) dummyHash() string {
	s.dummyOnce.Do(func() { s.dummy, _ = HashPassword(newSecret(""), s.params) })
	return s.dummy
}

// StartSession starts a session for userID signed in by method (any login
// method) and returns its secret.
func (s *Service) StartSession(ctx context.Context, userID, method string) (string, error) {
	now := s.now()
	// Sign-ins are rare next to requests: a good time to drop dead rows.
	if _, err := s.store.DeleteExpiredSessions(ctx, now, now.Add(-s.idle)); err != nil {
		return "", err
	}
	secret := newSecret(sessionPrefix)
	err := s.store.PutSession(ctx, Session{IDHash: HashSecret(secret), UserID: userID, Method: method,
		CreatedAt: now, LastSeenAt: now, ExpiresAt: now.Add(s.maxAge)})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// ErrNoSession is the answer to a session secret that is unknown, expired
// or logged out.
var ErrNoSession = core.Errorf(core.KindUnauthorized, "not signed in, or the session has expired; sign in again")

// Session returns the user a session secret belongs to, if the session is
// live; it extends the idle deadline.
func (s *Service) Session(ctx context.Context, secret string) (User, error) {
	if !strings.HasPrefix(secret, sessionPrefix) {
		return User{}, ErrNoSession
	}
	h := HashSecret(secret)
	now := s.now()
	s.mu.Lock()
	c, ok := s.cache[h]
	s.mu.Unlock()
	if ok && now.Sub(c.checked) < cacheFor && now.Before(c.sess.ExpiresAt) {
		return c.user, nil
	}
	sess, u, err := s.store.SessionUser(ctx, h)
	if isNotFound(err) {
		s.forget(func(k string, _ cached) bool { return k == h })
		return User{}, ErrNoSession
	}
	if err != nil {
		return User{}, err
	}
	if !now.Before(sess.ExpiresAt) || now.Sub(sess.LastSeenAt) >= s.idle {
		_ = s.store.DeleteSession(ctx, h)
		s.forget(func(k string, _ cached) bool { return k == h })
		return User{}, ErrNoSession
	}
	if now.Sub(sess.LastSeenAt) >= touchEvery {
		if err := s.store.TouchSession(ctx, h, now); err != nil {
			return User{}, err
		}
		sess.LastSeenAt = now
	}
	s.mu.Lock()
	if len(s.cache) >= maxCached {
		clear(s.cache)
	}
	s.cache[h] = cached{sess: sess, user: u, checked: now}
	s.mu.Unlock()
	return u, nil
}

// Logout ends a session; an unknown one is not an error.
func (s *Service) Logout(ctx context.Context, secret string) error {
	h := HashSecret(secret)
	err := s.store.DeleteSession(ctx, h)
	s.forget(func(k string, _ cached) bool { return k == h })
	return err
}

// ProxyUser returns the user a trusted ingress names, creating them on
// first sight (an admin only if they are the first user).
func (s *Service) ProxyUser(ctx context.Context, name string) (User, error) {
	if err := CheckName(name); err != nil {
		return User{}, err
	}
	return s.ExternalUser(ctx, IssuerProxy, name, name)
}

// ExternalUser returns the user another party vouches for, keyed by
// (issuer, subject) (an OpenID Connect login passes the ID token's iss
// and sub), creating them on first sight with name as display name; the
// first user of the installation becomes an admin. Start their session
// with StartSession.
func (s *Service) ExternalUser(ctx context.Context, issuer, subject, name string) (User, error) {
	if issuer == "" || subject == "" || issuer == IssuerLocal {
		return User{}, core.Errorf(core.KindInvalid, "an external user needs an issuer other than %q and a subject", IssuerLocal)
	}
	u, err := s.store.UserBySubject(ctx, issuer, subject)
	if !isNotFound(err) {
		return u, err
	}
	if name == "" || len(name) > 200 {
		name = subject
	}
	if name, err = s.unusedName(ctx, name, subject); err != nil {
		return User{}, err
	}
	u, err = s.store.CreateUser(ctx, User{ID: NewID("u_"), Issuer: issuer, Subject: subject, Name: name, CreatedAt: s.now()})
	if isConflict(err) { // created by a concurrent request
		return s.store.UserBySubject(ctx, issuer, subject)
	}
	return u, err
}

// unusedName is name, or, when another user is already called that, name
// marked with the new user's subject, so that two people are never listed
// (and audited) under one name.
func (s *Service) unusedName(ctx context.Context, name, subject string) (string, error) {
	users, err := s.store.ListUsers(ctx)
	if err != nil {
		return "", err
	}
	for _, u := range users {
		if u.Name == name {
			marked := name + " (" + subject + ")"
			if len(marked) > 200 {
				marked = marked[len(marked)-200:]
			}
			return marked, nil
		}
	}
	return name, nil
}

// MaxTokenTTL bounds a token's lifetime when one is asked for.
const MaxTokenTTL = 10 * 365 * 24 * time.Hour

// CreateToken makes a personal API token for userID; ttl 0 means it does
// not expire. The secret is returned once and only its hash is kept.
func (s *Service) CreateToken(ctx context.Context, userID, label string, ttl time.Duration) (string, Token, error) {
	return s.CreateScopedToken(ctx, userID, label, "", ttl)
}

// ScopeMetrics is the scope of a token that may read GET /metrics and
// nothing else (for a Prometheus server).
const ScopeMetrics = "metrics"

// CreateScopedToken is CreateToken with a scope: "" (everything the user
// may do) or ScopeMetrics.
func (s *Service) CreateScopedToken(ctx context.Context, userID, label, scope string, ttl time.Duration) (string, Token, error) {
	if scope != "" && scope != ScopeMetrics {
		return "", Token{}, core.Errorf(core.KindInvalid, "unknown token scope %q: the scopes are %q (or none: everything the user may do)", scope, ScopeMetrics)
	}
	if ttl < 0 || ttl > MaxTokenTTL {
		return "", Token{}, core.Errorf(core.KindInvalid, "a token's lifetime must be between 0 (never expires) and ten years")
	}
	if len(label) > 200 {
		return "", Token{}, core.Errorf(core.KindInvalid, "a token label may be at most 200 bytes")
	}
	if _, err := s.store.UserByID(ctx, userID); err != nil {
		return "", Token{}, err
	}
	now := s.now()
	secret := newSecret(tokenPrefix)
	t := Token{ID: NewID("tok_"), Hash: HashSecret(secret), UserID: userID, Label: label, Scope: scope, CreatedAt: now}
	if ttl > 0 {
		t.ExpiresAt = now.Add(ttl)
	}
	if err := s.store.PutToken(ctx, t); err != nil {
		return "", Token{}, err
	}
	return secret, t, nil
}

// ListTokens lists userID's tokens (never their secrets).
func (s *Service) ListTokens(ctx context.Context, userID string) ([]Token, error) {
	return s.store.ListTokens(ctx, userID)
}

// RevokeToken deletes one of userID's tokens.
func (s *Service) RevokeToken(ctx context.Context, userID, id string) error {
	return s.store.DeleteToken(ctx, userID, id)
}

// ErrBadToken is the answer to an unknown, revoked or expired API token.
var ErrBadToken = core.Errorf(core.KindUnauthorized, "the API token is unknown, revoked or expired")

// IsToken reports whether a bearer value looks like a personal API token.
func IsToken(secret string) bool { return strings.HasPrefix(secret, tokenPrefix) }

// TokenUser returns an API token and the user it belongs to, if it is
// live.
func (s *Service) TokenUser(ctx context.Context, secret string) (Token, User, error) {
	if !IsToken(secret) {
		return Token{}, User{}, ErrBadToken
	}
	t, u, err := s.store.TokenUser(ctx, HashSecret(secret))
	if isNotFound(err) {
		return Token{}, User{}, ErrBadToken
	}
	if err != nil {
		return Token{}, User{}, err
	}
	now := s.now()
	if !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt) {
		return Token{}, User{}, ErrBadToken
	}
	if now.Sub(t.LastUsedAt) >= touchEvery {
		if err := s.store.TouchToken(ctx, t.ID, now); err != nil {
			return Token{}, User{}, err
		}
	}
	return t, u, nil
}

// HasUsers reports whether any user exists.
func (s *Service) HasUsers(ctx context.Context) (bool, error) {
	us, err := s.store.ListUsers(ctx)
	return len(us) > 0, err
}

func isNotFound(err error) bool {
	var ce *core.Error
	return errors.As(err, &ce) && ce.Kind == core.KindNotFound
}

func isConflict(err error) bool {
	var ce *core.Error
	return errors.As(err, &ce) && ce.Kind == core.KindConflict
}
