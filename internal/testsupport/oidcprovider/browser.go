package oidcprovider

import (
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// NewBrowser returns a client with a cookie jar that does not follow
// redirects by itself: the helpers below walk them one by one, as a browser
// does, so a test can stop at any step (and tamper with it).
func NewBrowser(tb testing.TB) *http.Client {
	tb.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return &http.Client{
		Jar:           jar,
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Get GETs u without following a redirect and returns the answer and its
// body (closed).
func Get(tb testing.TB, b *http.Client, u string) (*http.Response, string) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	return do(tb, b, req)
}

func do(tb testing.TB, b *http.Client, req *http.Request) (*http.Response, string) {
	tb.Helper()
	resp, err := b.Do(req)
	if err != nil {
		tb.Fatalf("oidcprovider: %s %s: %v", req.Method, req.URL.Redacted(), err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp, string(body)
}

// Follow GETs u and follows redirects until an answer that is not one,
// which it returns with its body.
func Follow(tb testing.TB, b *http.Client, u string) (*http.Response, string) {
	tb.Helper()
	for range 20 {
		resp, body := Get(tb, b, u)
		loc, err := resp.Location()
		if resp.StatusCode < 300 || resp.StatusCode >= 400 || err != nil {
			return resp, body
		}
		u = loc.String()
	}
	tb.Fatalf("oidcprovider: more than 20 redirects from %s", u)
	return nil, ""
}

var hiddenID = regexp.MustCompile(`name="id" value="([^"]*)"`)

// Authorize signs in at the provider as a browser would: it GETs startURL
// (a client's login route), follows the redirects to the provider's login
// form, submits the user's username and password with the form's hidden
// request id, and follows the provider's redirects until one leaves the
// provider. That redirect, to the client's callback with code and state, is
// returned without being followed.
func (p *Provider) Authorize(tb testing.TB, b *http.Client, startURL string, u User) *url.URL {
	tb.Helper()
	issuer, _ := url.Parse(p.Issuer)
	next := startURL
	var form string
	for range 20 {
		resp, body := Get(tb, b, next)
		loc, err := resp.Location()
		if resp.StatusCode >= 300 && resp.StatusCode < 400 && err == nil {
			next = loc.String()
			continue
		}
		if resp.StatusCode != http.StatusOK || resp.Request.URL.Host != issuer.Host {
			tb.Fatalf("oidcprovider: expected the provider's login form at %s, got %s from %s: %.500s", p.Issuer, resp.Status, resp.Request.URL.Redacted(), body)
		}
		form = body
		break
	}
	m := hiddenID.FindStringSubmatch(form)
	if m == nil {
		tb.Fatalf("oidcprovider: the provider's login page has no request id: %.500s", form)
	}
	vals := url.Values{"id": {html.UnescapeString(m[1])}, "username": {u.Username}, "password": {u.Password}}
	req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(p.Issuer, "/")+"/login/username", strings.NewReader(vals.Encode()))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, body := do(tb, b, req)
	for range 20 {
		loc, err := resp.Location()
		if resp.StatusCode < 300 || resp.StatusCode >= 400 || err != nil {
			tb.Fatalf("oidcprovider: the provider did not redirect after the login form (wrong credentials?): %s: %.500s", resp.Status, body)
		}
		if loc.Host != issuer.Host {
			return loc
		}
		resp, body = Get(tb, b, loc.String())
	}
	tb.Fatalf("oidcprovider: more than 20 redirects at the provider")
	return nil
}
