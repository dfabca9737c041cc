// Package engine is the small Docker Engine API client of the docker
// provider: plain net/http and encoding/json over the engine's socket, with
// only the calls and fields the provider uses. It replaces
// github.com/moby/moby/client in the binary, whose dependencies
// (distribution/reference and others) compiled regexps at start-up; see
// docs/decisions.md.
//
// Like the docker CLI it honours DOCKER_HOST (unix:// or tcp://),
// DOCKER_CERT_PATH and DOCKER_TLS_VERIFY (TLS for tcp://), and
// DOCKER_API_VERSION (a fixed version, no negotiation). Otherwise the API
// version is negotiated on the first call: GET /_ping, then
// min(the engine's API-Version, MaxAPIVersion). Engines older than
// MinAPIVersion are refused.
package engine

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// MinAPIVersion is the oldest API this client speaks: Docker Engine
	// 20.10. Nothing it uses is newer than API 1.25, but older engines
	// are untested.
	MinAPIVersion = "1.41"
	// MaxAPIVersion is the newest API whose answers this client was
	// written against; a newer engine is spoken to at this version.
	MaxAPIVersion = "1.52"
	// DefaultHost is the engine address when DOCKER_HOST is unset.
	DefaultHost = "unix:///var/run/docker.sock"
)

// Client talks to one Docker Engine. It is safe for concurrent use.
type Client struct {
	host   string // as given, for messages
	base   string // scheme://authority[/base path], no trailing slash
	tr     *http.Transport
	hc     *http.Client
	manual bool // DOCKER_API_VERSION: no negotiation

	mu      sync.Mutex // serialises negotiation
	version string     // negotiated (or manual) version; "" until then
}

// ResolveHost is the engine address New uses for host: host itself, else
// $DOCKER_HOST, else DefaultHost.
func ResolveHost(host string) string {
	if host == "" {
		host = os.Getenv("DOCKER_HOST")
	}
	if host == "" {
		host = DefaultHost
	}
	return host
}

// New returns a client for host, or for DOCKER_HOST (else DefaultHost)
// when host is empty. It does not contact the engine.
func New(host string) (*Client, error) {
	host = ResolveHost(host)
	c := &Client{host: host}
	if v := os.Getenv("DOCKER_API_VERSION"); v != "" {
		v = strings.TrimPrefix(v, "v")
		if _, ok := parseVersion(v); !ok {
			return nil, fmt.Errorf("DOCKER_API_VERSION %q is not a version like 1.41", v)
		}
		c.version, c.manual = v, true
	}
	proto, addr, ok := strings.Cut(host, "://")
	if !ok || addr == "" {
		return nil, fmt.Errorf("unable to parse docker host %q: want unix:///path or tcp://host:port", host)
	}
	tr := &http.Transport{
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 0, // long calls (stop, pull) are bounded by their context
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	switch proto {
	case "unix":
		sock := addr
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialed(ctx, host)(dialer.DialContext(ctx, "unix", sock))
		}
		// Any authority will do; the socket is the address.
		c.base = "http://docker.sock"
	case "tcp":
		u, err := url.Parse("tcp://" + addr)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("unable to parse docker host %q: %v", host, err)
		}
		tr.Proxy = http.ProxyFromEnvironment
		tr.DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
			return dialed(ctx, host)(dialer.DialContext(ctx, network, a))
		}
		scheme := "http"
		tlsc, err := tlsFromEnv()
		if err != nil {
			return nil, err
		}
		if tlsc != nil {
			tr.TLSClientConfig = tlsc
			scheme = "https"
		}
		c.base = scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/")
	default:
		return nil, fmt.Errorf("docker host %q: protocol %q is not supported here (use unix:// or tcp://)", host, proto)
	}
	c.tr = tr
	c.hc = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c, nil
}

// dialed turns a dial failure into a *ConnError, unless the context ended.
func dialed(ctx context.Context, host string) func(net.Conn, error) (net.Conn, error) {
	return func(conn net.Conn, err error) (net.Conn, error) {
		if err != nil && ctx.Err() == nil {
			return nil, &ConnError{Host: host, Err: err}
		}
		return conn, err
	}
}

// tlsFromEnv is the docker CLI's TLS set-up: DOCKER_CERT_PATH (default
// ~/.docker when DOCKER_TLS_VERIFY is set) holds ca.pem, cert.pem and
// key.pem; the server's certificate is checked only with DOCKER_TLS_VERIFY.
// nil when neither variable is set: plain HTTP.
func tlsFromEnv() (*tls.Config, error) {
	dir, verify := os.Getenv("DOCKER_CERT_PATH"), os.Getenv("DOCKER_TLS_VERIFY") != ""
	if dir == "" && !verify {
		return nil, nil
	}
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("DOCKER_TLS_VERIFY is set but DOCKER_CERT_PATH is not, and there is no home directory: %w", err)
		}
		dir = filepath.Join(home, ".docker")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: !verify} //nolint:gosec // the docker CLI's meaning of an unset DOCKER_TLS_VERIFY
	if ca, err := os.ReadFile(filepath.Join(dir, "ca.pem")); err == nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("%s holds no PEM certificate", filepath.Join(dir, "ca.pem"))
		}
		cfg.RootCAs = pool
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read the Docker CA: %w", err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if _, err := os.Stat(certFile); err == nil {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("load the Docker client certificate from %s: %w", dir, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// Host is the engine address the client uses.
func (c *Client) Host() string { return c.host }

// Close drops idle connections.
func (c *Client) Close() error {
	c.tr.CloseIdleConnections()
	return nil
}

// Version is the API version in use; "" before negotiation.
func (c *Client) Version() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// Ping asks the engine whether it is up, negotiating the API version if
// that has not been done. It returns the engine's API version.
func (c *Client) Ping(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pingLocked(ctx)
}

func (c *Client) pingLocked(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/_ping", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.do(req)
	if err != nil {
		return "", err
	}
	defer drain(resp)
	if err := checkStatus(resp); err != nil {
		return "", err
	}
	server := resp.Header.Get("Api-Version")
	if c.manual || c.version != "" {
		return server, nil
	}
	v, err := negotiate(server)
	if err != nil {
		return server, err
	}
	c.version = v
	return server, nil
}

// negotiate picks the version to speak with an engine that reports server.
func negotiate(server string) (string, error) {
	if server == "" {
		// Engines have sent API-Version since 1.25; none is very old or
		// not an engine: try our newest and let the engine say.
		return MaxAPIVersion, nil
	}
	sv, ok := parseVersion(server)
	if !ok {
		return "", &Error{StatusCode: http.StatusBadRequest, Message: fmt.Sprintf("the engine reports API version %q, which is not a version", server)}
	}
	minV, _ := parseVersion(MinAPIVersion)
	maxV, _ := parseVersion(MaxAPIVersion)
	if sv.less(minV) {
		return "", &Error{StatusCode: http.StatusBadRequest, Message: fmt.Sprintf("API version %s is not supported by this client: the minimum supported API version is %s", server, MinAPIVersion)}
	}
	if maxV.less(sv) {
		return MaxAPIVersion, nil
	}
	return server, nil
}

type version struct{ major, minor int }

func (a version) less(b version) bool {
	return a.major < b.major || (a.major == b.major && a.minor < b.minor)
}

func parseVersion(s string) (version, bool) {
	maj, mino, ok := strings.Cut(s, ".")
	if !ok {
		return version{}, false
	}
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(mino)
	if err1 != nil || err2 != nil || a < 0 || b < 0 {
		return version{}, false
	}
	return version{a, b}, true
}

// apiVersion returns the version to put in request paths, negotiating
// first if needed. A failed negotiation is retried on the next call.
func (c *Client) apiVersion(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version != "" {
		return c.version, nil
	}
	if _, err := c.pingLocked(ctx); err != nil {
		return "", err
	}
	return c.version, nil
}

// request sends one API call and returns the response of a 2xx or 3xx
// answer (the engine answers 304 to starting a started container, stopping
// a stopped one: no error, like the docker CLI). Any other status is an
// *Error.
func (c *Client) request(ctx context.Context, method, p string, q url.Values, body io.Reader, contentType string) (*http.Response, error) {
	v, err := c.apiVersion(ctx)
	if err != nil {
		return nil, err
	}
	u := c.base + path.Join("/v"+v, p)
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("User-Agent", "companion")
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	if err := checkStatus(resp); err != nil {
		drain(resp)
		return nil, err
	}
	return resp, nil
}

func (c *Client) do(req *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err == nil {
		return resp, nil
	}
	if req.URL.Scheme == "http" && strings.Contains(err.Error(), "malformed HTTP response") {
		return nil, &ConnError{Host: c.host, Err: fmt.Errorf("%w (is it a TLS endpoint? set DOCKER_CERT_PATH / DOCKER_TLS_VERIFY)", err)}
	}
	return nil, err
}

// call sends a request with an optional JSON body and decodes a JSON
// answer into out (if not nil).
func (c *Client) call(ctx context.Context, method, p string, q url.Values, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, p, err)
		}
		body, ct = bytes.NewReader(b), "application/json"
	}
	resp, err := c.request(ctx, method, p, q, body, ct)
	if err != nil {
		return err
	}
	defer drain(resp)
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode the answer to %s %s: %w", method, p, err)
	}
	return nil
}

func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// checkStatus returns an *Error for a status of 400 and above, with the
// engine's message ({"message": ...}) or the body's text.
func checkStatus(resp *http.Response) error {
	if resp.StatusCode < http.StatusBadRequest {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	msg := ""
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &e) == nil && e.Message != "" {
		msg = e.Message
	} else {
		msg = strings.TrimSpace(string(b))
	}
	if msg == "" {
		msg = fmt.Sprintf("request returned %s for %s %s", resp.Status, resp.Request.Method, resp.Request.URL.Path)
	}
	return &Error{StatusCode: resp.StatusCode, Message: msg}
}
