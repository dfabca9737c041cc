package emulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FaultKind names what an injected fault does to a request.
type FaultKind string

const (
	// FaultRateLimit answers 429 with the provider's own rate-limit headers
	// and body.
	FaultRateLimit FaultKind = "rate_limit"
	// FaultStatus answers Fault.Status (default 500) with the provider's
	// error body.
	FaultStatus FaultKind = "status"
	// FaultHang holds the request open until the client gives up, the fault
	// queue releases hangs, or Fault.Hold elapses.
	FaultHang FaultKind = "hang"
	// FaultRedirect answers a redirect (default 302) to Fault.Location.
	FaultRedirect FaultKind = "redirect"
)

// Fault is one injected misbehaviour, applied to the next Count requests
// that match Method and PathPrefix. Faults are applied before
// authentication, the way an edge proxy or rate limiter would answer.
type Fault struct {
	Kind  FaultKind
	Count int // requests affected; 0 means 1

	// Match: empty fields match everything.
	Method     string
	PathPrefix string

	Status     int           // FaultStatus (default 500), FaultRedirect (default 302)
	RetryAfter time.Duration // FaultRateLimit (default 1s); optional on FaultStatus
	Location   string        // FaultRedirect
	Hold       time.Duration // FaultHang: upper bound on the hang (default 10m)
	// Throttler names the provider throttler for providers that have several
	// (Daytona); empty picks the one the real route would use.
	Throttler string
}

// faultWire is the admin-route JSON form of a Fault. Durations are Go
// duration strings ("30s") or numbers of seconds.
type faultWire struct {
	Kind       FaultKind       `json:"kind"`
	Count      int             `json:"count,omitempty"`
	Method     string          `json:"method,omitempty"`
	PathPrefix string          `json:"path_prefix,omitempty"`
	Status     int             `json:"status,omitempty"`
	RetryAfter json.RawMessage `json:"retry_after,omitempty"`
	Location   string          `json:"location,omitempty"`
	Hold       json.RawMessage `json:"hold,omitempty"`
	Throttler  string          `json:"throttler,omitempty"`
}

// MarshalJSON renders durations as Go duration strings.
func (f Fault) MarshalJSON() ([]byte, error) {
	w := faultWire{Kind: f.Kind, Count: f.Count, Method: f.Method, PathPrefix: f.PathPrefix,
		Status: f.Status, Location: f.Location, Throttler: f.Throttler}
	if f.RetryAfter != 0 {
		w.RetryAfter, _ = json.Marshal(f.RetryAfter.String())
	}
	if f.Hold != 0 {
		w.Hold, _ = json.Marshal(f.Hold.String())
	}
	return json.Marshal(w)
}

// UnmarshalJSON accepts durations as strings ("1m30s") or seconds (90).
func (f *Fault) UnmarshalJSON(b []byte) error {
	var w faultWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	ra, err := ParseDuration(w.RetryAfter)
	if err != nil {
		return fmt.Errorf("retry_after: %w", err)
	}
	hold, err := ParseDuration(w.Hold)
	if err != nil {
		return fmt.Errorf("hold: %w", err)
	}
	*f = Fault{Kind: w.Kind, Count: w.Count, Method: w.Method, PathPrefix: w.PathPrefix,
		Status: w.Status, RetryAfter: ra, Location: w.Location, Hold: hold, Throttler: w.Throttler}
	return nil
}

// ParseDuration reads a JSON duration: a Go duration string or a number of
// seconds. Empty input is zero.
func ParseDuration(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if d, err := time.ParseDuration(s); err == nil {
			return d, nil
		}
		secs, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is neither a duration nor a number of seconds", s)
		}
		return time.Duration(secs * float64(time.Second)), nil
	}
	var secs float64
	if err := json.Unmarshal(raw, &secs); err != nil {
		return 0, fmt.Errorf("want a duration string or seconds, got %s", raw)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

func (f Fault) validate() error {
	switch f.Kind {
	case FaultRateLimit, FaultHang:
	case FaultStatus:
		if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
			return fmt.Errorf("status fault wants a 4xx or 5xx status, got %d", f.Status)
		}
	case FaultRedirect:
		if f.Location == "" {
			return fmt.Errorf("redirect fault needs a location")
		}
		if f.Status != 0 && (f.Status < 300 || f.Status > 399) {
			return fmt.Errorf("redirect fault wants a 3xx status, got %d", f.Status)
		}
	default:
		return fmt.Errorf("unknown fault kind %q (want rate_limit, status, hang or redirect)", f.Kind)
	}
	if f.Count < 0 {
		return fmt.Errorf("count must not be negative")
	}
	return nil
}

// withDefaults fills the documented defaults.
func (f Fault) withDefaults() Fault {
	if f.Count == 0 {
		f.Count = 1
	}
	switch f.Kind {
	case FaultRateLimit:
		if f.RetryAfter <= 0 {
			f.RetryAfter = time.Second
		}
	case FaultStatus:
		if f.Status == 0 {
			f.Status = http.StatusInternalServerError
		}
	case FaultRedirect:
		if f.Status == 0 {
			f.Status = http.StatusFound
		}
	case FaultHang:
		if f.Hold <= 0 {
			f.Hold = 10 * time.Minute
		}
	}
	return f
}

func (f Fault) matches(r *http.Request) bool {
	if f.Method != "" && !strings.EqualFold(f.Method, r.Method) {
		return false
	}
	return f.PathPrefix == "" || strings.HasPrefix(r.URL.Path, f.PathPrefix)
}

// Faults is a queue of injected faults. The first queued fault that matches
// a request is applied to it and its count goes down by one; a fault whose
// count reaches zero leaves the queue. Safe for concurrent use.
type Faults struct {
	mu      sync.Mutex
	queue   []*Fault
	release chan struct{} // closed to end every current hang
}

// NewFaults returns an empty queue.
func NewFaults() *Faults {
	return &Faults{release: make(chan struct{})}
}

// Add queues f after the faults already queued.
func (q *Faults) Add(f Fault) error {
	if err := f.validate(); err != nil {
		return err
	}
	f = f.withDefaults()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queue = append(q.queue, &f)
	return nil
}

// RateLimit makes the next n requests answer 429 with Retry-After.
func (q *Faults) RateLimit(n int, retryAfter time.Duration) {
	q.mustAdd(Fault{Kind: FaultRateLimit, Count: n, RetryAfter: retryAfter})
}

// Fail makes the next n requests answer status (a 4xx or 5xx).
func (q *Faults) Fail(n, status int) {
	q.mustAdd(Fault{Kind: FaultStatus, Count: n, Status: status})
}

// Hang makes the next n requests hang until the client gives up.
func (q *Faults) Hang(n int) {
	q.mustAdd(Fault{Kind: FaultHang, Count: n})
}

// Redirect makes the next n requests answer 302 to location.
func (q *Faults) Redirect(n int, location string) {
	q.mustAdd(Fault{Kind: FaultRedirect, Count: n, Location: location})
}

func (q *Faults) mustAdd(f Fault) {
	if err := q.Add(f); err != nil {
		panic("emulator: " + err.Error())
	}
}

// Clear drops every queued fault and ends current hangs.
func (q *Faults) Clear() {
	q.mu.Lock()
	q.queue = nil
	q.mu.Unlock()
	q.ReleaseHangs()
}

// Pending returns the queued faults with their remaining counts.
func (q *Faults) Pending() []Fault {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]Fault, 0, len(q.queue))
	for _, f := range q.queue {
		out = append(out, *f)
	}
	return out
}

// ReleaseHangs ends every request currently held by a hang fault (they get
// a 503). Later hang faults hang again.
func (q *Faults) ReleaseHangs() {
	q.mu.Lock()
	defer q.mu.Unlock()
	close(q.release)
	q.release = make(chan struct{})
}

// take removes one use of the first fault matching r.
func (q *Faults) take(r *http.Request) (Fault, <-chan struct{}, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, f := range q.queue {
		if !f.matches(r) {
			continue
		}
		got := *f
		f.Count--
		if f.Count <= 0 {
			q.queue = append(q.queue[:i], q.queue[i+1:]...)
		}
		return got, q.release, true
	}
	return Fault{}, nil, false
}
