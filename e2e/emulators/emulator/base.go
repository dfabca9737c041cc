package emulator

import (
	"bufio"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
	"time"
)

// AdminPrefix is where the admin routes live. No provider API has a path
// starting with an underscore segment, so it cannot collide.
const AdminPrefix = "/_emulator/"

// Dialect is what a provider package tells Base about its wire conventions.
type Dialect interface {
	// Authenticate checks r's credentials against the accepted tokens.
	Authenticate(r *http.Request) AuthOutcome
	// Unauthorized writes the provider's 401 answer.
	Unauthorized(w http.ResponseWriter, r *http.Request, outcome AuthOutcome)
	// Fault writes a FaultRateLimit or FaultStatus answer in the provider's
	// style (headers and body).
	Fault(w http.ResponseWriter, r *http.Request, f Fault)
}

// Base is the machinery every emulator shares: its clock, fault queue and
// request log. Provider servers embed it, so Clock, Faults, Requests and
// Close are part of each server's API.
type Base struct {
	clock  *Clock
	faults *Faults
	log    *Log
}

// NewBase returns a Base reading clock; a nil clock is a wall clock.
func NewBase(clock *Clock) *Base {
	if clock == nil {
		clock = NewWallClock()
	}
	return &Base{clock: clock, faults: NewFaults(), log: &Log{}}
}

// Clock returns the emulated clock the state machines read.
func (b *Base) Clock() *Clock { return b.clock }

// Faults returns the fault-injection queue.
func (b *Base) Faults() *Faults { return b.faults }

// Requests returns the request log.
func (b *Base) Requests() *Log { return b.log }

// Close ends requests held by hang faults so an httptest.Server can shut
// down. The emulator stays usable.
func (b *Base) Close() { b.faults.ReleaseHangs() }

// Handler wraps api with fault injection, authentication and request
// logging, in that order, and mounts admin (if non-nil) under AdminPrefix.
// Admin routes are neither authenticated, faulted nor logged.
func (b *Base) Handler(d Dialect, api http.Handler, admin http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if admin != nil && strings.HasPrefix(r.URL.Path, AdminPrefix) {
			admin.ServeHTTP(w, r)
			return
		}
		rec := &recorder{ResponseWriter: w}
		entry := Request{
			Time:   b.clock.Now(),
			Method: r.Method,
			Path:   r.URL.Path,
			Query:  r.URL.RawQuery,
			Auth:   PresentedCredentials(r),
		}
		defer func() {
			entry.Status = rec.status
			b.log.add(entry)
		}()
		if f, release, ok := b.faults.take(r); ok {
			entry.Fault = f.Kind
			b.applyFault(d, rec, r, f, release)
			return
		}
		entry.Result = d.Authenticate(r)
		if entry.Result != AuthOK {
			d.Unauthorized(rec, r, entry.Result)
			return
		}
		api.ServeHTTP(rec, r)
	})
}

func (b *Base) applyFault(d Dialect, w http.ResponseWriter, r *http.Request, f Fault, release <-chan struct{}) {
	switch f.Kind {
	case FaultRedirect:
		w.Header().Set("Location", f.Location)
		w.WriteHeader(f.Status)
	case FaultHang:
		t := time.NewTimer(f.Hold)
		defer t.Stop()
		select {
		case <-r.Context().Done():
			// The client gave up; nothing is written and the log shows status 0.
		case <-release:
			d.Fault(w, r, Fault{Kind: FaultStatus, Status: http.StatusServiceUnavailable})
		case <-t.C:
			d.Fault(w, r, Fault{Kind: FaultStatus, Status: http.StatusGatewayTimeout})
		}
	default:
		d.Fault(w, r, f)
	}
}

// recorder remembers the status written through it. It passes Flush and
// Hijack on (and Unwrap for http.ResponseController), so a streamed answer
// or a WebSocket upgrade behind it works as without it.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush sends what was written so far, when the server's writer can.
func (r *recorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	http.NewResponseController(r.ResponseWriter).Flush()
}

// Hijack hands the connection over (a protocol switch such as a WebSocket
// upgrade), logged as 101.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err == nil && r.status == 0 {
		r.status = http.StatusSwitchingProtocols
	}
	return c, brw, err
}

// PresentedCredentials lists the credential headers on r by name and, for
// Authorization, scheme: never their values.
func PresentedCredentials(r *http.Request) []string {
	var out []string
	for _, v := range r.Header.Values("Authorization") {
		scheme, _, _ := strings.Cut(strings.TrimSpace(v), " ")
		if scheme == "" {
			out = append(out, "Authorization")
		} else {
			out = append(out, "Authorization: "+scheme)
		}
	}
	for _, h := range []string{"X-API-Key", "X-Session-API-Key", "Cookie"} {
		if len(r.Header.Values(h)) > 0 {
			out = append(out, h)
		}
	}
	return out
}

// Tokens is a set of accepted credentials compared in constant time.
type Tokens []string

// Accepts reports whether tok is one of the accepted tokens.
func (ts Tokens) Accepts(tok string) bool {
	ok := false
	for _, t := range ts {
		if t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
			ok = true
		}
	}
	return ok
}

// CheckBearer checks an "Authorization: Bearer <token>" header.
func (ts Tokens) CheckBearer(r *http.Request) AuthOutcome {
	v := r.Header.Get("Authorization")
	if v == "" {
		return AuthMissing
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !ts.Accepts(strings.TrimSpace(tok)) {
		return AuthInvalid
	}
	return AuthOK
}

// CheckHeader checks a bare-token header such as X-API-Key.
func (ts Tokens) CheckHeader(r *http.Request, name string) AuthOutcome {
	v := r.Header.Get(name)
	if v == "" {
		return AuthMissing
	}
	if !ts.Accepts(strings.TrimSpace(v)) {
		return AuthInvalid
	}
	return AuthOK
}
