package oidclogin

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"strings"
)

// Refusal is an answer the callback gives instead of signing someone in.
// Code is stable (tests and front ends match on it); Message is for people
// and never holds a code, token or verifier.
type Refusal struct {
	Status  int
	Code    string
	Message string
}

func (r *Refusal) Error() string { return r.Code + ": " + r.Message }

// Codes of the refusals this package gives.
const (
	CodeProviderError   = "oidc_provider_error"   // the provider redirected back with ?error=
	CodeStateMismatch   = "oidc_state_mismatch"   // no login of this browser has that state
	CodeLoginExpired    = "oidc_login_expired"    // the login took longer than LoginTTL
	CodeInvalid         = "invalid"               // the callback lacks its code
	CodeCodeRejected    = "oidc_code_rejected"    // the provider refused the code (reused, expired)
	CodeProviderFailed  = "oidc_provider_failed"  // the provider could not be reached or answered nonsense
	CodeTokenInvalid    = "oidc_token_invalid"    // the ID token failed verification
	CodeNonceMismatch   = "oidc_nonce_mismatch"   // the ID token was not issued for this login
	CodeEmailUnverified = "oidc_email_unverified" // allowed domains are set and the email is not verified
	CodeDomainNotAllow  = "oidc_domain_not_allowed"
	CodeGroupMissing    = "oidc_group_missing"
)

func refuse(status int, code, format string, args ...any) *Refusal {
	return &Refusal{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// wantsJSON: programs that ask for JSON get the API's error body; browsers
// (which ask for text/html) get a page.
func wantsJSON(r *http.Request) bool {
	accept := r.Header.Get("Accept")
	return strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html")
}

// refusalPage is the page browsers get; every value in it is escaped
// with html.EscapeString (text, and attributes in double quotes). It is
// not an html/template: that package, and text/template under it, would be
// linked into companion for this page alone, and every start of the
// binary runs their package init.
func refusalPage(message, code, start string) string {
	e := html.EscapeString
	return `<!doctype html>
<html><head><meta charset="utf-8"><title>Sign-in failed</title></head>
<body><h1>Sign-in failed</h1><p>` + e(message) + `</p><p><small>` + e(code) + `</small></p>
<p><a href="` + e(start) + `">Sign in again</a></p></body></html>
`
}

func (l *Login) writeRefusal(w http.ResponseWriter, r *http.Request, f *Refusal) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if wantsJSON(r) {
		h.Set("Content-Type", "application/json")
		w.WriteHeader(f.Status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": f.Code, "message": f.Message}})
		return
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'")
	w.WriteHeader(f.Status)
	_, _ = io.WriteString(w, refusalPage(f.Message, f.Code, l.cfg.BasePath+StartPath))
}

// internal answers an unexpected failure with a reference that matches the
// log line carrying the details.
func (l *Login) internal(w http.ResponseWriter, r *http.Request, what string, err error) {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	ref := hex.EncodeToString(b)
	l.cfg.Logger.Error("oidc login: "+what, "ref", ref, "err", err)
	l.writeRefusal(w, r, refuse(http.StatusInternalServerError, "internal", "sign-in failed unexpectedly (ref %s in companion's log)", ref))
}

// clean makes text from the provider safe and short to show.
func clean(s string, max int) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= max {
			b.WriteString("…")
			break
		}
		if r < 0x20 || r == 0x7f {
			r = ' '
		}
		b.WriteRune(r)
	}
	return b.String()
}
