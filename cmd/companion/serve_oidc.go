package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/auth/oidclogin"
	"github.com/canvasapp/companion/core"
	uibridge "github.com/canvasapp/companion/ui-bridge"
)

// checkOIDC checks the --oidc-* flags against --auth: they need oidc in
// --auth and a --public-url (the provider sends browsers back to it), and
// oidc needs an issuer and a client.
func (l *loginFlags) checkOIDC() error {
	f := l.oidcFlags
	given := f.Issuer != "" || f.ClientID != "" || f.SecretFile != "" || f.AllowedDomains != "" || f.Group != ""
	if !l.oidc {
		if given {
			return fmt.Errorf("the --oidc-* flags are only used with --auth oidc (e.g. --auth oidc or --auth local,oidc)")
		}
		return nil
	}
	if l.public == nil {
		return fmt.Errorf("--auth oidc needs --public-url (the address people reach companion at): the redirect URL registered at the provider is --public-url + /v1/login/oidc/callback")
	}
	if f.Issuer == "" || f.ClientID == "" || f.SecretFile == "" {
		return fmt.Errorf("--auth oidc needs --oidc-issuer URL, --oidc-client-id ID and --oidc-client-secret-file FILE (as registered at the provider)")
	}
	return nil
}

// oidcRoutes discovers the provider (retrying while it starts; a clear
// error after that) and returns the bridge's OpenID Connect routes. A
// successful login finds or creates the user by the ID token's issuer and
// subject, never by email, and starts a session with the same cookie a
// password login gets.
func (l *loginFlags) oidcRoutes(ctx context.Context, store loginStore, svc *auth.Service, workspaces *core.Service, lg *uibridge.Login, log *slog.Logger) (*uibridge.OIDCRoutes, error) {
	// The provider gets scheme and host only; the base path is passed
	// on its own (oidclogin.Config.PublicURL).
	public := l.public.Scheme + "://" + l.public.Host
	onLogin := func(w http.ResponseWriter, r *http.Request, id oidclogin.Identity) error {
		u, err := svc.ExternalUser(r.Context(), id.Issuer, id.Subject, oidcDisplayName(id))
		if err != nil {
			return err
		}
		if u.Admin {
			adminArrived(r.Context(), store, svc, workspaces, log)
		}
		return lg.SignIn(r.Context(), w, u, "oidc")
	}
	cfg, err := l.oidcFlags.Config(public, l.basePath, onLogin, log)
	if err != nil {
		return nil, err
	}
	login, err := oidclogin.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	log.Info("OpenID Connect sign-in on; register this redirect URL at the provider", "redirect_url", login.RedirectURL())
	return &uibridge.OIDCRoutes{Start: login.StartHandler(), Callback: login.CallbackHandler()}, nil
}

// oidcDisplayName is the name a new OpenID Connect user is listed under:
// their email when the provider verified it, else their name, else the
// subject. It is only a label (an unverified email is anyone's claim; a
// name already taken is marked by ExternalUser); the user is the
// (issuer, subject) pair.
func oidcDisplayName(id oidclogin.Identity) string {
	switch {
	case id.Email != "" && id.EmailVerified:
		return id.Email
	case id.Name != "":
		return id.Name
	}
	return id.Subject
}
