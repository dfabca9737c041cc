// Package hookreceiver is a webhook receiver for tests, written the way
// docs/webhooks.md tells a receiver to be: it checks the
// Companion-Signature header with the webhook's secret (HMAC-SHA256 over
// "<t>.<body>", the timestamp within a tolerance), refuses a request that
// fails with 401, and drops a delivery whose Idempotency-Key it already
// accepted. It verifies on its own, not with package webhooks, so a test
// through it checks the documented scheme.
package hookreceiver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Event is one accepted delivery.
type Event struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt time.Time       `json:"created_at"`
	Data      json.RawMessage `json:"data"`
	// Key is the delivery's Idempotency-Key; Raw the exact body;
	// Signature its header; At when it arrived.
	Key, Signature string
	Raw            []byte
	At             time.Time
}

// Receiver is a running receiver.
type Receiver struct {
	URL string

	mu        sync.Mutex
	secret    string
	down      bool
	accepted  []Event
	seen      map[string]int // accepted per Idempotency-Key, duplicates included
	refused   int            // bad signature or too old
	whileDown int
	onAccept  func(Event)
	hold      chan Held // armed by HoldNext: the next request is held
}

// Held is a request the receiver holds without answering.
type Held struct {
	// Remote is the sender's address (its local end of the connection).
	Remote string
	// Key is the delivery's Idempotency-Key.
	Key string
}

// Start starts a receiver on a loopback port; it stops when the test
// ends.
func Start(t testing.TB) *Receiver {
	r := &Receiver{seen: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL + "/hooks/companion"
	return r
}

// SetSecret sets the secret deliveries are verified with.
func (r *Receiver) SetSecret(s string) { r.mu.Lock(); r.secret = s; r.mu.Unlock() }

// SetDown makes the receiver answer 503 to everything (down) or not.
func (r *Receiver) SetDown(down bool) { r.mu.Lock(); r.down = down; r.mu.Unlock() }

// OnAccept calls f (on the request's goroutine, before the answer) for
// each newly accepted event.
func (r *Receiver) OnAccept(f func(Event)) { r.mu.Lock(); r.onAccept = f; r.mu.Unlock() }

// HoldNext makes the receiver hold the next request without answering
// until its sender goes away; the returned channel says who sent it.
func (r *Receiver) HoldNext() <-chan Held {
	h := make(chan Held, 1)
	r.mu.Lock()
	r.hold = h
	r.mu.Unlock()
	return h
}

// Tolerance is how old a signature's timestamp may be.
const Tolerance = 5 * time.Minute

// Verify is the check docs/webhooks.md describes.
func Verify(secret, header string, body []byte, now time.Time) bool {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	if d := now.Sub(time.Unix(sec, 0)); d > Tolerance || d < -Tolerance {
		return false
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "." + string(body)))
	want := m.Sum(nil)
	for _, s := range sigs {
		if got, err := hex.DecodeString(s); err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil || req.Method != http.MethodPost {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	if h := r.hold; h != nil {
		// Held until the sender goes away: as a receiver that got the
		// body but whose answer never reached companion.
		r.hold = nil
		r.mu.Unlock()
		h <- Held{Remote: req.RemoteAddr, Key: req.Header.Get("Idempotency-Key")}
		<-req.Context().Done()
		return
	}
	if r.down {
		r.whileDown++
		r.mu.Unlock()
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	sig := req.Header.Get("Companion-Signature")
	if !Verify(r.secret, sig, body, time.Now()) {
		r.refused++
		r.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	key := req.Header.Get("Idempotency-Key")
	r.seen[key]++
	if r.seen[key] > 1 {
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK) // a duplicate: acknowledged, dropped
		return
	}
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		r.mu.Unlock()
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	ev.Key, ev.Signature, ev.Raw, ev.At = key, sig, body, time.Now()
	r.accepted = append(r.accepted, ev)
	f := r.onAccept
	r.mu.Unlock()
	if f != nil {
		f(ev)
	}
	w.WriteHeader(http.StatusNoContent)
}

// Events returns the accepted events of type typ ("" for all).
func (r *Receiver) Events(typ string) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.accepted {
		if typ == "" || e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// Stats says how many requests were refused for their signature, answered
// while down, and the deliveries that came more than once.
func (r *Receiver) Stats() (refused, whileDown int, dups map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	dups = map[string]int{}
	for k, n := range r.seen {
		if n > 1 {
			dups[k] = n
		}
	}
	return r.refused, r.whileDown, dups
}
