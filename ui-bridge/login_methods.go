package uibridge

import (
	"net/http"
)

// OIDCRoutes are the two browser routes of an OpenID Connect login
// (auth/oidclogin serves them). The bridge mounts them at
// GET /v1/login/oidc and GET /v1/login/oidc/callback, outside the login
// gate. Their redirects already carry the base path (the login package is
// told it), so the bridge passes their Location headers on unchanged.
type OIDCRoutes struct {
	Start    http.Handler
	Callback http.Handler
}

// Paths of the OpenID Connect routes, under the base path.
const (
	oidcStartPath    = "/v1/login/oidc"
	oidcCallbackPath = "/v1/login/oidc/callback"
)

// LoginMethods is GET /v1/login's answer: which ways of signing in this
// server offers, so a page can show a password form, an OpenID Connect
// button, or neither (an ingress signs people in).
type LoginMethods struct {
	// Methods is a subset of "local", "oidc" and "proxy", in that order.
	Methods []string `json:"methods"`
	// OIDCURL is where a browser starts an OpenID Connect sign-in (a full
	// path, base path included); present only with "oidc". A
	// ?return_to=/path query says where to land afterwards.
	OIDCURL string `json:"oidc_url,omitempty"`
}

// methods is what this configuration offers.
func (l *Login) methods() LoginMethods {
	m := LoginMethods{Methods: []string{}}
	if l.Local {
		m.Methods = append(m.Methods, "local")
	}
	if l.OIDC != nil {
		m.Methods = append(m.Methods, "oidc")
		m.OIDCURL = l.BasePath + oidcStartPath
	}
	if l.Proxy != nil {
		m.Methods = append(m.Methods, "proxy")
	}
	return m
}

// oidcRoutes mounts the OpenID Connect routes when configured.
func (s *Server) oidcRoutes(rt *router) {
	o := s.cfg.Login.OIDC
	if o == nil {
		return
	}
	rt.handle("GET "+oidcStartPath, rawLocation(o.Start))
	rt.handle("GET "+oidcCallbackPath, rawLocation(o.Callback))
}

// loginMethods answers GET /v1/login, with or without a credential.
func (s *Server) loginMethods(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, s.cfg.Login.methods())
}

// rawLocation serves h with the writer under the base-path rewriter, so
// the Location h sets (a path that already holds the base path, or
// another site's URL) is sent as it is.
func rawLocation(h http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if pw, ok := w.(*prefixWriter); ok {
			w = pw.ResponseWriter
		}
		h.ServeHTTP(w, r)
	}
}
