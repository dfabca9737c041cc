package main

import (
	"net/url"
	"regexp"
	"strings"
)

// The remote URL in X-Archive-Repo-Remote goes through upstream's two
// redactions (openhands/sdk/utils/redact.py): credentials embedded in an
// http(s) URL become "****", and the values of query parameters with
// secret-looking names become "<redacted>".

var urlCredentials = regexp.MustCompile(`(?i)(https?://)[^/@\s\x{1c}-\x{1f}\x{85}\p{Z}]+@`)

func redactURLCredentials(text string) string {
	return urlCredentials.ReplaceAllString(text, "${1}****@")
}

// sensitiveParams are always redacted; other names are when they contain
// one of secretKeyParts (case-insensitively).
var sensitiveParams = map[string]bool{"tavilyapikey": true, "apikey": true, "api_key": true, "token": true,
	"access_token": true, "secret": true, "key": true}

var secretKeyParts = []string{"AUTHORIZATION", "COOKIE", "CREDENTIAL", "KEY", "PASSWORD", "SECRET", "SESSION", "TOKEN"}

func secretName(name string) bool {
	if sensitiveParams[strings.ToLower(name)] {
		return true
	}
	up := strings.ToUpper(name)
	for _, p := range secretKeyParts {
		if strings.Contains(up, p) {
			return true
		}
	}
	return false
}

// redactURLParams rebuilds the URL as Python's urlparse/parse_qs/urlencode
// round trip does when it has a query: the scheme lower-cased, parameters
// grouped by name in first-seen order and re-encoded with quote_plus, the
// secret ones replaced. A URL without a query is returned as it is.
func redactURLParams(u string) string {
	rest, frag, hasFrag := strings.Cut(u, "#")
	prefix, query, _ := strings.Cut(rest, "?")
	if query == "" {
		return u
	}
	var names []string
	values := map[string][]string{}
	for pair := range strings.SplitSeq(query, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		k, v = pyUnquotePlus(k), pyUnquotePlus(v)
		if _, seen := values[k]; !seen {
			names = append(names, k)
		}
		values[k] = append(values[k], v)
	}
	var enc []string
	for _, k := range names {
		for _, v := range values[k] {
			if secretName(k) {
				v = "<redacted>"
			}
			enc = append(enc, pyQuotePlus(k)+"="+pyQuotePlus(v))
		}
	}
	out := lowerScheme(prefix)
	if q := strings.Join(enc, "&"); q != "" {
		out += "?" + q
	}
	if hasFrag && frag != "" {
		out += "#" + frag
	}
	return out
}

// lowerScheme lower-cases a URL's scheme, which urlparse does.
func lowerScheme(u string) string {
	i := strings.IndexByte(u, ':')
	if i <= 0 || !isASCIILetter(u[0]) {
		return u
	}
	for j := 0; j < i; j++ {
		c := u[j]
		if !isASCIILetter(c) && !('0' <= c && c <= '9') && c != '+' && c != '-' && c != '.' {
			return u
		}
	}
	return strings.ToLower(u[:i]) + u[i:]
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func pyQuotePlus(s string) string { return strings.ReplaceAll(pyQuote(s, " "), " ", "+") }

// pyUnquotePlus is urllib's unquote_plus: "+" is a space, %XX a byte,
// malformed escapes kept, and bytes that are not UTF-8 replaced.
func pyUnquotePlus(s string) string {
	s = strings.ReplaceAll(s, "+", " ")
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if d, err := url.PathUnescape(s[i : i+3]); err == nil {
				b = append(b, d...)
				i += 2
				continue
			}
		}
		b = append(b, s[i])
	}
	return decodeReplace(b)
}
