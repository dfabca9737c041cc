package oidclogin

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// identity builds who signed in from the verified ID token, filled in from
// the userinfo endpoint (many providers put email and groups only there
// when an access token is issued), and applies the domain and group rules.
// The ID token's values win where both have one.
func (l *Login) identity(ctx context.Context, idt *oidc.IDToken, tok *oauth2.Token) (Identity, *Refusal) {
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, refuse(http.StatusBadGateway, CodeTokenInvalid, "the ID token's claims do not decode")
	}
	if l.provider.UserInfoEndpoint() != "" {
		ui, err := l.provider.UserInfo(ctx, oauth2.StaticTokenSource(tok))
		if err != nil {
			return Identity{}, refuse(http.StatusBadGateway, CodeProviderFailed, "the provider's userinfo endpoint failed: %s", clean(err.Error(), 200))
		}
		// OpenID Connect Core 5.3.2: userinfo about someone else is ignored
		// entirely, and here that means refused.
		if ui.Subject != idt.Subject {
			return Identity{}, refuse(http.StatusBadGateway, CodeTokenInvalid, "the provider's userinfo is about another subject than its ID token")
		}
		extra := map[string]any{}
		if err := ui.Claims(&extra); err == nil {
			for k, v := range extra {
				if _, ok := claims[k]; !ok {
					claims[k] = v
				}
			}
		}
	}

	id := Identity{Issuer: idt.Issuer, Subject: idt.Subject}
	id.Email, _ = claims["email"].(string)
	id.EmailVerified = truthy(claims["email_verified"])
	id.Name, _ = claims["name"].(string)
	id.Groups = stringList(lookup(claims, l.cfg.GroupClaim))

	if len(l.cfg.domains) > 0 {
		at := strings.LastIndex(id.Email, "@")
		if id.Email == "" || at < 0 {
			return Identity{}, refuse(http.StatusForbidden, CodeDomainNotAllow, "the provider gave no email address, and only some email domains may sign in here")
		}
		if !id.EmailVerified {
			return Identity{}, refuse(http.StatusForbidden, CodeEmailUnverified, "your email address is not verified at the provider, and only verified addresses of some domains may sign in here")
		}
		domain := strings.ToLower(id.Email[at+1:])
		if !l.cfg.domains[domain] {
			return Identity{}, refuse(http.StatusForbidden, CodeDomainNotAllow, "email addresses at %s may not sign in here: ask an administrator", clean(domain, 100))
		}
	}
	if l.cfg.RequiredGroup != "" && !slices.Contains(id.Groups, l.cfg.RequiredGroup) {
		return Identity{}, refuse(http.StatusForbidden, CodeGroupMissing, "you are not in the group %q that may sign in here (claim %q): ask an administrator", l.cfg.RequiredGroup, l.cfg.GroupClaim)
	}
	return id, nil
}

// lookup finds a claim by its full name first (names such as
// "https://example.com/groups" contain dots), then as a dotted path.
func lookup(claims map[string]any, name string) any {
	if v, ok := claims[name]; ok {
		return v
	}
	var cur any = claims
	for _, part := range strings.Split(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		if cur, ok = m[part]; !ok {
			return nil
		}
	}
	return cur
}

// stringList reads a claim that is a string or a list of strings; anything
// else is no groups.
func stringList(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// truthy reads email_verified, which some providers send as a string.
func truthy(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case string:
		return v == "true"
	case json.Number:
		return v.String() == "1"
	}
	return false
}
