package oidclogin

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Routes under Config.BasePath.
const (
	StartPath    = "/v1/login/oidc"
	CallbackPath = "/v1/login/oidc/callback"
)

// Identity is who the provider says signed in. Issuer and Subject identify
// the person; the rest is informational and may change at the provider.
type Identity struct {
	Issuer        string
	Subject       string
	Email         string
	EmailVerified bool
	Name          string
	Groups        []string
}

// LoginFunc is called once per successful callback. It must not write a
// body: it sets headers (the session cookie) and returns nil, and the
// callback then redirects. To refuse, it returns a *Refusal; any other
// error is answered as a 500 with a reference to the log.
type LoginFunc func(w http.ResponseWriter, r *http.Request, id Identity) error

// Clock is where the package reads time and waits (discovery backoff, login
// expiry, ID token expiry). core.RealClock and the test fake clock satisfy
// it.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) interface {
		C() <-chan time.Time
		Stop() bool
	}
}

// Config configures a Login. Issuer, ClientID, ClientSecret, PublicURL and
// OnLogin are required.
type Config struct {
	// Issuer is the provider's issuer URL exactly as its discovery document
	// states it (a trailing slash matters). https, or http on loopback only.
	Issuer       string
	ClientID     string
	ClientSecret string
	// PublicURL is how browsers reach companion (scheme and host, no path
	// beyond what the ingress adds); with BasePath it makes the redirect URL
	// PublicURL + BasePath + CallbackPath, which must be registered at the
	// provider. An https PublicURL makes the login cookie Secure.
	PublicURL string
	// BasePath prefixes the routes and the login cookie's Path ("" or
	// "/api/companion").
	BasePath string
	// AllowedDomains, when set, admits only people whose email is verified
	// and whose domain (after the last @, case-insensitive) is listed.
	AllowedDomains []string
	// GroupClaim names the claim holding groups (default "groups"). A name
	// that is not a top-level claim is tried as a dotted path into objects
	// ("realm_access.roles"). The value may be a string or a list of them.
	GroupClaim string
	// RequiredGroup, when set, admits only people whose GroupClaim has it.
	RequiredGroup string
	// ExtraScopes are asked for besides openid, email and profile.
	ExtraScopes []string
	OnLogin     LoginFunc

	// CookieKey seals the login cookie (32 bytes). Empty: a random key per
	// process, so a login started before a restart must start again.
	CookieKey []byte
	// LoginTTL bounds how long a login may take at the provider (10 min).
	LoginTTL time.Duration
	// DiscoveryTimeout bounds the retries of discovery in New (30 s).
	DiscoveryTimeout time.Duration
	// HTTPClient talks to the provider (default: 15 s timeout per request).
	HTTPClient *http.Client
	Clock      Clock
	Logger     *slog.Logger
}

// SplitList splits a comma-separated flag value, dropping blanks.
func SplitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// ReadClientSecretFile reads the client secret from path, without its
// trailing newline. It refuses a file others can read or write (the secret
// would not be one) and an empty file.
func ReadClientSecretFile(path string) (string, error) {
	if path == "" {
		return "", errors.New("oidc: no client secret file: pass --oidc-client-secret-file FILE (a file holding the secret the provider issued)")
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("oidc: reading the client secret: %w", err)
	}
	if fi.Mode().Perm()&0o007 != 0 {
		return "", fmt.Errorf("oidc: client secret file %s is accessible to other users (mode %v): run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("oidc: reading the client secret: %w", err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if strings.TrimSpace(s) == "" {
		return "", fmt.Errorf("oidc: client secret file %s is empty: put the secret the provider issued in it", path)
	}
	return s, nil
}

// checked is a Config with defaults applied and its URLs parsed.
type checked struct {
	Config
	publicURL   *url.URL
	redirectURL string
	secure      bool
	domains     map[string]bool
}

func (c Config) check() (*checked, error) {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	if c.Issuer == "" {
		bad("--oidc-issuer is required")
	} else if u, err := url.Parse(c.Issuer); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		bad("--oidc-issuer %q is not an http(s) URL", c.Issuer)
	} else if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		bad("--oidc-issuer %q uses plain http: only https is accepted, except on loopback for development", c.Issuer)
	}
	if c.ClientID == "" {
		bad("--oidc-client-id is required")
	}
	if c.ClientSecret == "" {
		bad("the client secret is empty (--oidc-client-secret-file)")
	}
	var pub *url.URL
	if c.PublicURL == "" {
		bad("--public-url is required: the redirect URL the provider sends people back to is made from it")
	} else if u, err := url.Parse(c.PublicURL); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.RawQuery != "" || u.Fragment != "" {
		bad("--public-url %q must be an absolute http(s) URL without query or fragment", c.PublicURL)
	} else {
		pub = u
	}
	if c.BasePath != "" && (!strings.HasPrefix(c.BasePath, "/") || strings.HasSuffix(c.BasePath, "/") || strings.ContainsAny(c.BasePath, "?#\\ ")) {
		bad("base path %q must start with / and not end with one (e.g. /api/companion)", c.BasePath)
	}
	if c.OnLogin == nil {
		bad("OnLogin is required")
	}
	if len(c.CookieKey) != 0 && len(c.CookieKey) != 32 {
		bad("the cookie key must be 32 bytes, not %d", len(c.CookieKey))
	}
	domains := map[string]bool{}
	for _, d := range c.AllowedDomains {
		d = strings.ToLower(strings.TrimSpace(d))
		if d == "" || strings.Contains(d, "@") || strings.ContainsAny(d, " /") {
			bad("allowed domain %q is not a domain (write example.com, not user@example.com)", d)
			continue
		}
		domains[d] = true
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("oidc: configuration: %s", strings.Join(problems, "; "))
	}

	if c.GroupClaim == "" {
		c.GroupClaim = "groups"
	}
	if c.LoginTTL <= 0 {
		c.LoginTTL = 10 * time.Minute
	}
	if c.DiscoveryTimeout <= 0 {
		c.DiscoveryTimeout = 30 * time.Second
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 15 * time.Second}
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return &checked{
		Config:      c,
		publicURL:   pub,
		redirectURL: strings.TrimSuffix(c.PublicURL, "/") + c.BasePath + CallbackPath,
		secure:      pub.Scheme == "https",
		domains:     domains,
	}, nil
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) interface {
	C() <-chan time.Time
	Stop() bool
} {
	return sysTimer{time.NewTimer(d)}
}

type sysTimer struct{ t *time.Timer }

func (s sysTimer) C() <-chan time.Time { return s.t.C }
func (s sysTimer) Stop() bool          { return s.t.Stop() }
