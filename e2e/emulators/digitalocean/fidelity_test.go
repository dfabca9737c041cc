package digitalocean

import (
	"testing"
	"time"
)

func TestDeleteLockedSessionIs423(t *testing.T) {
	h := newHarness(t, Options{Delays: &Delays{}})
	s := h.s.Seed(Session{Status: StatusLocked})
	h.wantEnvelope(h.call("DELETE", "/v2/agents/sessions/"+s.SessionID, ""), 423, "LOCKED", "locked")
	if got := h.session(s.SessionID); got.Status != StatusLocked {
		t.Fatalf("a refused delete changed the session: %s", got.Status)
	}
	// Classic style: the id names the status too.
	c := newHarness(t, Options{Delays: &Delays{}, ErrorStyle: ErrorsClassic})
	cs := c.s.Seed(Session{Status: StatusLocked})
	c.wantClassic(c.call("DELETE", "/v2/agents/sessions/"+cs.SessionID, ""), 423, "locked")
}

func TestDeleteHeldSessionIs409UntilReleased(t *testing.T) {
	h := newHarness(t, Options{Delays: &Delays{}})
	s := h.s.Seed(Session{})
	if !h.s.Hold(s.SessionID, "checkpoint") {
		t.Fatal("Hold: session not found")
	}
	h.wantEnvelope(h.call("DELETE", "/v2/agents/sessions/"+s.SessionID, ""), 409, "FAILED_PRECONDITION", "checkpoint")
	if got := h.session(s.SessionID); got.Status != StatusReady {
		t.Fatalf("a refused delete changed the session: %s", got.Status)
	}
	h.s.Release(s.SessionID)
	h.want(h.call("DELETE", "/v2/agents/sessions/"+s.SessionID, ""), 204)
	if got := h.session(s.SessionID); got.Status != StatusDestroyed {
		t.Fatalf("after release and delete: %s", got.Status)
	}
}

func TestRateLimitWindowsArePerToken(t *testing.T) {
	const other = "dop_v1_othertoken"
	h := newHarness(t, Options{EnforceRateLimits: true, Tokens: []string{other}})
	for range 250 {
		h.want(h.call("GET", "/v2/agents/sessions", ""), 200)
	}
	h.wantClassic(h.call("GET", "/v2/agents/sessions", ""), 429, "too_many_requests")
	// Another token has its own budget, untouched by the first one's use.
	r := h.want(h.call("GET", "/v2/agents/sessions", "", "Authorization", "Bearer "+other), 200)
	if got := r.Header.Get("ratelimit-remaining"); got != "4999" {
		t.Fatalf("other token's ratelimit-remaining = %s, want 4999", got)
	}
	h.s.Clock().Advance(time.Minute)
	r = h.want(h.call("GET", "/v2/agents/sessions", ""), 200)
	// 250 served, one refused by the minute window (the hour counts it),
	// and this one.
	if got := r.Header.Get("ratelimit-remaining"); got != "4748" {
		t.Fatalf("first token's hourly ratelimit-remaining = %s, want 4748", got)
	}
}
