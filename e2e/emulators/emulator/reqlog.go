package emulator

import (
	"strings"
	"sync"
	"time"
)

// AuthOutcome says what the emulator made of a request's credentials.
type AuthOutcome string

const (
	AuthOK      AuthOutcome = "ok"      // the right header with an accepted token
	AuthMissing AuthOutcome = "missing" // the expected header was absent
	AuthInvalid AuthOutcome = "invalid" // present but wrong scheme or unknown token
	AuthSkipped AuthOutcome = ""        // not checked (a fault answered first)
)

// Request is one logged API request. It records which credential headers
// were presented (header name and scheme, e.g. "Authorization: Bearer" or
// "X-API-Key") and never their values.
type Request struct {
	Time   time.Time   `json:"time"` // emulated time when it arrived
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Query  string      `json:"query,omitempty"`
	Auth   []string    `json:"auth,omitempty"`
	Result AuthOutcome `json:"auth_result,omitempty"`
	Status int         `json:"status"` // 0 when the client gave up first
	Fault  FaultKind   `json:"fault,omitempty"`
}

// maxLog bounds memory in long manual sessions; tests never get near it.
const maxLog = 10000

// Log records API requests in arrival order. Safe for concurrent use.
type Log struct {
	mu   sync.Mutex
	reqs []Request
}

func (l *Log) add(r Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.reqs) >= maxLog {
		l.reqs = append(l.reqs[:0], l.reqs[len(l.reqs)-maxLog/2:]...)
	}
	l.reqs = append(l.reqs, r)
}

// All returns a copy of every logged request, oldest first.
func (l *Log) All() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Request(nil), l.reqs...)
}

// Matching returns the logged requests with the given method (empty: any)
// whose path contains substr (empty: any). Tests use it to assert, say,
// that no request touched a paused box's id.
func (l *Log) Matching(method, substr string) []Request {
	var out []Request
	for _, r := range l.All() {
		if method != "" && !strings.EqualFold(method, r.Method) {
			continue
		}
		if substr != "" && !strings.Contains(r.Path, substr) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// Reset forgets every logged request.
func (l *Log) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = nil
}
