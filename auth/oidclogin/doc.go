// Package oidclogin signs people in to companion serve through an OpenID
// Connect provider: the authorization code flow with PKCE (S256), state and
// nonce, built on github.com/coreos/go-oidc/v3 and golang.org/x/oauth2.
//
// It owns the two browser routes of that flow and nothing else:
//
//	GET {base}/v1/login/oidc            redirects to the provider
//	GET {base}/v1/login/oidc/callback   checks the answer, calls OnLogin
//
// Sessions, users and cookies other than its own short-lived login cookie
// belong to the caller, through Config.OnLogin.
//
// # What it guarantees
//
//   - The provider is discovered once, in New, with retries for a provider
//     that is still starting; New fails with an error naming the issuer
//     (and, for a mismatched issuer, the exact value to use) rather than
//     returning a half-working Login.
//   - OnLogin is called only for a callback that (1) carries the state this
//     browser was given, in a login cookie sealed with AES-256-GCM under a
//     server key and younger than Config.LoginTTL, (2) redeemed its code at
//     the provider with the PKCE verifier of that same login, (3) brought an
//     ID token whose signature, issuer, audience and expiry go-oidc verified
//     and whose nonce is the login's, (4) passes the allowed email domains
//     (a verified email whose domain is listed) and the required group, when
//     those are configured.
//   - Identity.Issuer and Identity.Subject come from the verified ID token.
//     Callers key users by that pair, never by email: an email address can
//     be reassigned at the provider, a subject cannot.
//   - Every refusal is a 4xx (5xx when the provider itself fails) with a
//     stable code, as JSON `{"error":{"code","message"}}` for clients that
//     ask for JSON and as a small HTML page otherwise. No answer or log line
//     contains a code, token, verifier or the sealed cookie.
//   - A login cookie is used once: the callback clears it whatever the
//     outcome, and the provider refuses a code that was already redeemed.
//
// # Wiring it into serve (the seam)
//
// The routes must sit outside the /v1 login gate (they are how one logs
// in). With D1's session code providing OnLogin, the wiring is:
//
//	var oidcFlags oidclogin.Flags
//	oidcFlags.Register(fs) // --oidc-issuer, --oidc-client-id, --oidc-client-secret-file, …
//	// after parsing, when --auth includes oidc:
//	cfg, err := oidcFlags.Config(*publicURL, *basePath, sessions.LoginOIDC, logger)
//	login, err := oidclogin.New(ctx, cfg) // discovery; fails clearly, after retries
//	login.Register(mux)                   // GET {base}/v1/login/oidc and …/callback
//
// sessions.LoginOIDC finds or creates the user by (issuer, subject) and
// sets the session cookie.
//
// OnLogin sets its cookies and returns nil; the callback then redirects
// (303) to the page the login started from. OnLogin returns a *Refusal to
// refuse someone with its own status, code and message.
package oidclogin
