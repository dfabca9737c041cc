package uibridge

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// NormalizeOrigin returns a browser origin in the form browsers send in
// the Origin header (RFC 6454 serialisation): scheme and host in lower
// case, no default port, no path. An allowlist entry written any other
// way ("HTTP://App.example:80/") could never match a real request, so it
// is rewritten here, and what cannot be an origin at all is refused with
// the reason.
func NormalizeOrigin(s string) (string, error) {
	raw := strings.TrimSpace(s)
	switch raw {
	case "":
		return "", fmt.Errorf("origin is empty; want scheme://host[:port], e.g. http://localhost:5173")
	case "*":
		return "", fmt.Errorf("a wildcard origin would let every web page call companion; list each origin")
	case "null":
		return "", fmt.Errorf(`"null" is the origin of sandboxed and file: pages, shared by all of them; it cannot be allowed`)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("not an origin (%v); want scheme://host[:port]", err)
	}
	if u.Scheme == "" || u.Opaque != "" || u.Host == "" {
		return "", fmt.Errorf("not an origin; want scheme://host[:port], e.g. http://localhost:5173")
	}
	if u.User != nil {
		return "", fmt.Errorf("an origin has no user name or password")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", fmt.Errorf("an origin has no path, query or fragment; browsers send only scheme://host[:port]")
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	for _, r := range host {
		if r > 0x7e {
			return "", fmt.Errorf("host %q is not ASCII: browsers send the punycode form (xn--...), write that", u.Hostname())
		}
	}
	port := u.Port()
	if port == "" && strings.HasSuffix(u.Host, ":") {
		return "", fmt.Errorf("the port after %q is empty", u.Hostname())
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("port %q is not a number from 1 to 65535", port)
		}
		port = strconv.Itoa(n) // no leading zeros
		if (scheme == "http" && n == 80) || (scheme == "https" && n == 443) {
			port = "" // browsers leave the default port out
		}
	}
	switch {
	case port != "":
		host = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		host = "[" + host + "]" // IPv6
	}
	return scheme + "://" + host, nil
}
