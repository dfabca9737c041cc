package daytona

import (
	"slices"
	"testing"
	"time"
)

// listedIDs returns the ids GET /api/sandbox shows.
func (h *harness) listedIDs() []string {
	h.t.Helper()
	r := h.call("GET", "/api/sandbox", "")
	if r.Status != 200 {
		h.t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	var page struct{ Items []Sandbox }
	r.Decode(h.t, &page)
	var ids []string
	for _, sb := range page.Items {
		ids = append(ids, sb.ID)
	}
	return ids
}

func TestListIsEventuallyConsistent(t *testing.T) {
	h := newHarness(t, Options{ListLag: 30 * time.Second, Delays: &Delays{}})
	old := h.s.Seed(SeedSandbox{Name: "already-there"})
	sb := h.sandbox("POST", "/api/sandbox", `{}`, 200)

	// Created: Get sees it at once, the list only after the lag.
	if got := h.state(sb.ID); got != StateStarted {
		t.Fatalf("get after create: %s", got)
	}
	if ids := h.listedIDs(); slices.Contains(ids, sb.ID) || !slices.Contains(ids, old.ID) {
		t.Fatalf("list right after create = %v; want the seeded box only", ids)
	}
	h.s.Clock().Advance(29 * time.Second)
	if slices.Contains(h.listedIDs(), sb.ID) {
		t.Fatal("listed before the lag passed")
	}
	h.s.Clock().Advance(time.Second)
	if !slices.Contains(h.listedIDs(), sb.ID) {
		t.Fatal("not listed once the lag passed")
	}

	// Deleted: Get says 404 at once, the list still shows the box, in the
	// state it had, until the lag has passed.
	h.sandbox("DELETE", "/api/sandbox/"+sb.ID, "", 200)
	h.wantError(h.call("GET", "/api/sandbox/"+sb.ID, ""), 404, "not found")
	r := h.call("GET", "/api/sandbox", "")
	var page struct{ Items []Sandbox }
	r.Decode(t, &page)
	i := slices.IndexFunc(page.Items, func(x Sandbox) bool { return x.ID == sb.ID })
	if i < 0 || page.Items[i].State != StateStarted {
		t.Fatalf("list right after delete: %+v; want the box as it was (started)", page.Items)
	}
	h.s.Clock().Advance(30 * time.Second)
	if ids := h.listedIDs(); slices.Contains(ids, sb.ID) || !slices.Contains(ids, old.ID) {
		t.Fatalf("list after the lag = %v; want the deleted box gone, the seeded one kept", ids)
	}
}

func TestListWithoutLagIsCurrent(t *testing.T) {
	h := newHarness(t, Options{Delays: &Delays{}})
	sb := h.sandbox("POST", "/api/sandbox", `{}`, 200)
	if !slices.Contains(h.listedIDs(), sb.ID) {
		t.Fatal("not listed right after create")
	}
	h.sandbox("DELETE", "/api/sandbox/"+sb.ID, "", 200)
	if slices.Contains(h.listedIDs(), sb.ID) {
		t.Fatal("listed right after delete")
	}
}

func TestFailedAuthIsThrottled(t *testing.T) {
	h := newHarness(t, Options{EnforceRateLimits: true, RateLimits: map[string]int{"failed-auth": 2}})
	for i := range 2 {
		r := h.call("GET", "/api/sandbox", "", "Authorization", "Bearer wrong")
		h.wantError(r, 401, "Invalid API key")
		if got := r.Header.Get("X-RateLimit-Remaining-failed-auth"); got != []string{"1", "0"}[i] {
			t.Fatalf("401 #%d: X-RateLimit-Remaining-failed-auth = %q", i+1, got)
		}
	}
	r := h.call("GET", "/api/sandbox", "", "Authorization", "Bearer wrong")
	h.wantError(r, 429, "Rate limit")
	if r.Header.Get("Retry-After") != "60" {
		t.Fatalf("Retry-After = %q, want 60", r.Header.Get("Retry-After"))
	}
	// The right key is not held back by someone else's failures.
	if r := h.call("GET", "/api/sandbox", ""); r.Status != 200 {
		t.Fatalf("good key after failed-auth throttling: %d", r.Status)
	}
	h.s.Clock().Advance(time.Minute)
	h.wantError(h.call("GET", "/api/sandbox", "", "Authorization", "Bearer wrong"), 401, "Invalid API key")
}
