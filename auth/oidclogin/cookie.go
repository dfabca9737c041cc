package oidclogin

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
)

// The login in progress travels in a cookie sealed with AES-256-GCM rather
// than in server memory: nothing for a stranger to fill up, nothing lost to
// another replica, and the browser that started the login is the only one
// that can finish it. The cookie is named after its state, so two tabs can
// log in at once; the name is also the sealed data's associated data, so a
// cookie cannot be moved to another state.

const (
	cookiePrefix = "companion_oidc_"
	// maxPending bounds the login cookies one browser holds; a start with
	// this many clears them all first.
	maxPending = 3
)

// pending is one login in progress: what the callback must find again.
type pending struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	ReturnTo string `json:"r"`
	Expires  int64  `json:"e"` // unix seconds
}

type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(name string, p pending) (string, error) {
	plain, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := s.aead.Seal(nonce, nonce, plain, []byte(name))
	return base64.RawURLEncoding.EncodeToString(out), nil
}

var errUnsealed = errors.New("login cookie does not open")

func (s *sealer) open(name, value string) (pending, error) {
	var p pending
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return p, errUnsealed
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(name))
	if err != nil {
		return p, errUnsealed
	}
	if err := json.Unmarshal(plain, &p); err != nil {
		return p, errUnsealed
	}
	return p, nil
}

// cookieName is the login cookie of one state. __Secure- makes browsers
// refuse it over plain http or set by a non-secure page.
func (l *Login) cookieName(state string) string {
	name := cookiePrefix + state
	if l.cfg.secure {
		name = "__Secure-" + name
	}
	return name
}

func (l *Login) cookiePath() string { return l.cfg.BasePath + StartPath }

func (l *Login) setLoginCookie(w http.ResponseWriter, p pending) error {
	name := l.cookieName(p.State)
	v, err := l.sealer.seal(name, p)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: v, Path: l.cookiePath(),
		MaxAge:   int(l.cfg.LoginTTL / time.Second),
		HttpOnly: true, Secure: l.cfg.secure,
		// Lax: the callback is a top-level GET from the provider's site.
		SameSite: http.SameSiteLaxMode,
	})
	return nil
}

func (l *Login) clearCookie(w http.ResponseWriter, name string) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: "", Path: l.cookiePath(), MaxAge: -1,
		HttpOnly: true, Secure: l.cfg.secure, SameSite: http.SameSiteLaxMode,
	})
}

// loginCookies are the names of this package's cookies r carries.
func (l *Login) loginCookies(r *http.Request) []string {
	var names []string
	for _, c := range r.Cookies() {
		if strings.HasPrefix(strings.TrimPrefix(c.Name, "__Secure-"), cookiePrefix) {
			names = append(names, c.Name)
		}
	}
	return names
}
