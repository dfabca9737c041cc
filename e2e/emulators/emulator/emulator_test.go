package emulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/emulator/emutest"
	"github.com/canvasapp/companion/internal/testsupport"
)

// toy is a minimal dialect: bearer auth, faults as {"status":N}.
type toy struct{ tokens Tokens }

func (d toy) Authenticate(r *http.Request) AuthOutcome { return d.tokens.CheckBearer(r) }
func (d toy) Unauthorized(w http.ResponseWriter, r *http.Request, o AuthOutcome) {
	WriteJSON(w, http.StatusUnauthorized, map[string]any{"outcome": o})
}
func (d toy) Fault(w http.ResponseWriter, r *http.Request, f Fault) {
	if f.Kind == FaultRateLimit {
		w.Header().Set("Retry-After", "7")
		f.Status = http.StatusTooManyRequests
	}
	WriteJSON(w, f.Status, map[string]any{"status": f.Status})
}

const secret = "s3cret-token-value"

func newToy(t *testing.T) (*Base, *httptest.Server) {
	t.Helper()
	b := NewBase(NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"path": r.URL.Path})
	})
	srv := httptest.NewServer(b.Handler(toy{Tokens{secret}}, api, b.AdminMux()))
	t.Cleanup(func() { b.Close(); srv.Close() })
	return b, srv
}

func do(t *testing.T, c *http.Client, method, url, token, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestClock(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewFakeClock(start)
	if !c.Now().Equal(start) {
		t.Fatalf("fake clock moved by itself")
	}
	c.Advance(90 * time.Second)
	if got := c.Now(); !got.Equal(start.Add(90 * time.Second)) {
		t.Fatalf("after Advance: %v", got)
	}
	c.Set(start.Add(time.Hour))
	if got := c.Now(); !got.Equal(start.Add(time.Hour)) {
		t.Fatalf("after Set: %v", got)
	}

	w := NewWallClock()
	w.Advance(48 * time.Hour)
	if d := time.Until(w.Now()); d < 47*time.Hour {
		t.Fatalf("wall clock offset not applied: %v", d)
	}
	target := time.Date(2030, 5, 5, 0, 0, 0, 0, time.UTC)
	w.Set(target)
	if d := w.Now().Sub(target); d < 0 || d > time.Minute {
		t.Fatalf("wall clock Set: off by %v", d)
	}
}

func TestAuthAndLogNeverHoldsToken(t *testing.T) {
	b, srv := newToy(t)
	c := srv.Client()
	if resp, _ := do(t, c, "GET", srv.URL+"/x", "", ""); resp.StatusCode != 401 {
		t.Fatalf("missing token: %d", resp.StatusCode)
	}
	if resp, body := do(t, c, "GET", srv.URL+"/x", "wrong", ""); resp.StatusCode != 401 || !strings.Contains(body, "invalid") {
		t.Fatalf("wrong token: %d %s", resp.StatusCode, body)
	}
	if resp, _ := do(t, c, "GET", srv.URL+"/x?a=1", secret, ""); resp.StatusCode != 200 {
		t.Fatalf("good token: %d", resp.StatusCode)
	}
	reqs := b.Requests().All()
	if len(reqs) != 3 {
		t.Fatalf("logged %d requests, want 3", len(reqs))
	}
	if reqs[0].Result != AuthMissing || reqs[1].Result != AuthInvalid || reqs[2].Result != AuthOK {
		t.Fatalf("auth outcomes: %v %v %v", reqs[0].Result, reqs[1].Result, reqs[2].Result)
	}
	if got := reqs[2].Auth; len(got) != 1 || got[0] != "Authorization: Bearer" {
		t.Fatalf("presented credentials: %v", got)
	}
	if reqs[2].Query != "a=1" || reqs[2].Status != 200 {
		t.Fatalf("entry: %+v", reqs[2])
	}
	raw, _ := json.Marshal(reqs)
	_, logBody := do(t, c, "GET", srv.URL+"/_emulator/requests", "", "")
	for _, s := range []string{string(raw), logBody} {
		if strings.Contains(s, secret) || strings.Contains(s, "wrong") {
			t.Fatalf("request log leaks a token: %s", s)
		}
	}
}

func TestFaultsCountAndMatch(t *testing.T) {
	b, srv := newToy(t)
	c := srv.Client()
	if err := b.Faults().Add(Fault{Kind: FaultStatus, Status: 503, Count: 2, Method: "POST", PathPrefix: "/boxes"}); err != nil {
		t.Fatal(err)
	}
	b.Faults().RateLimit(1, 7*time.Second)
	// The 429 is first in line for GETs; the 503 only matches POST /boxes.
	resp, _ := do(t, c, "GET", srv.URL+"/boxes", secret, "")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("first GET: %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for i := range 2 {
		if resp, _ := do(t, c, "POST", srv.URL+"/boxes/1", secret, ""); resp.StatusCode != 503 {
			t.Fatalf("POST %d: %d", i, resp.StatusCode)
		}
	}
	if resp, _ := do(t, c, "POST", srv.URL+"/boxes/1", secret, ""); resp.StatusCode != 200 {
		t.Fatalf("after faults ran out: %d", resp.StatusCode)
	}
	if n := len(b.Faults().Pending()); n != 0 {
		t.Fatalf("%d faults left", n)
	}
	if got := b.Requests().Matching("POST", "/boxes/1"); len(got) != 3 || got[0].Fault != FaultStatus || got[2].Fault != "" {
		t.Fatalf("log of faulted requests: %+v", got)
	}
	if err := b.Faults().Add(Fault{Kind: "explode"}); err == nil {
		t.Fatal("unknown fault kind accepted")
	}
}

func TestHangUntilClientGivesUp(t *testing.T) {
	b, srv := newToy(t)
	b.Faults().Hang(1)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/slow", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	_, err := srv.Client().Do(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hung request: err = %v, want deadline exceeded", err)
	}
	// The next request is served normally.
	if resp, _ := do(t, srv.Client(), "GET", srv.URL+"/slow", secret, ""); resp.StatusCode != 200 {
		t.Fatalf("after hang: %d", resp.StatusCode)
	}
	// A request is logged when its handler returns: the hung one only once
	// the server has noticed its client gone, which may be after the next.
	testsupport.Poll(t, 5*time.Second, func() error {
		got := b.Requests().Matching("GET", "/slow")
		hung, served := 0, 0
		for _, r := range got {
			switch {
			case r.Fault == FaultHang && r.Status == 0:
				hung++
			case r.Fault == "" && r.Status == 200:
				served++
			}
		}
		if len(got) == 2 && hung == 1 && served == 1 {
			return nil
		}
		return fmt.Errorf("want the hang logged with status 0 and one request served: %+v", got)
	})
}

func TestReleaseHangs(t *testing.T) {
	b, srv := newToy(t)
	b.Faults().Hang(1)
	done := make(chan int)
	go func() {
		resp, _ := do(t, srv.Client(), "GET", srv.URL+"/slow", secret, "")
		done <- resp.StatusCode
	}()
	testsupport.Until(t, 5*time.Second, "the hang fault to be taken", func() bool { return len(b.Faults().Pending()) == 0 })
	b.Close()
	if got := <-done; got != 503 {
		t.Fatalf("released hang answered %d, want 503", got)
	}
}

func TestRedirect(t *testing.T) {
	b, srv := newToy(t)
	b.Faults().Redirect(1, "https://elsewhere.example/steal")
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, _ := do(t, c, "GET", srv.URL+"/x", secret, "")
	if resp.StatusCode != 302 || resp.Header.Get("Location") != "https://elsewhere.example/steal" {
		t.Fatalf("redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestAdminRoutes(t *testing.T) {
	b, srv := newToy(t)
	c := srv.Client()
	resp, body := do(t, c, "POST", srv.URL+"/_emulator/clock", "", `{"advance":"1h"}`)
	if resp.StatusCode != 200 || !strings.Contains(body, "2026-01-02T04:04:05Z") {
		t.Fatalf("advance: %d %s", resp.StatusCode, body)
	}
	resp, _ = do(t, c, "POST", srv.URL+"/_emulator/clock", "", `{"advance":90}`)
	if resp.StatusCode != 200 || !b.Clock().Now().Equal(time.Date(2026, 1, 2, 4, 5, 35, 0, time.UTC)) {
		t.Fatalf("advance by seconds: %d %v", resp.StatusCode, b.Clock().Now())
	}
	resp, _ = do(t, c, "POST", srv.URL+"/_emulator/clock", "", `{"set":"2027-01-01T00:00:00Z"}`)
	if resp.StatusCode != 200 || b.Clock().Now().Year() != 2027 {
		t.Fatalf("set: %d %v", resp.StatusCode, b.Clock().Now())
	}
	if resp, _ := do(t, c, "POST", srv.URL+"/_emulator/clock", "", `{"advance":"soon"}`); resp.StatusCode != 400 {
		t.Fatalf("bad duration: %d", resp.StatusCode)
	}
	resp, body = do(t, c, "POST", srv.URL+"/_emulator/faults", "",
		`[{"kind":"rate_limit","count":2,"retry_after":"30s"},{"kind":"status","status":500,"path_prefix":"/a"}]`)
	if resp.StatusCode != 201 {
		t.Fatalf("post faults: %d %s", resp.StatusCode, body)
	}
	pending := b.Faults().Pending()
	if len(pending) != 2 || pending[0].RetryAfter != 30*time.Second || pending[0].Count != 2 || pending[1].PathPrefix != "/a" {
		t.Fatalf("pending: %+v", pending)
	}
	if resp, _ := do(t, c, "POST", srv.URL+"/_emulator/faults", "", `{"kind":"redirect"}`); resp.StatusCode != 400 {
		t.Fatalf("redirect without location accepted: %d", resp.StatusCode)
	}
	if resp, _ := do(t, c, "DELETE", srv.URL+"/_emulator/faults", "", ""); resp.StatusCode != 204 || len(b.Faults().Pending()) != 0 {
		t.Fatalf("delete faults: %d", resp.StatusCode)
	}
	do(t, c, "GET", srv.URL+"/api/thing", secret, "")
	_, body = do(t, c, "GET", srv.URL+"/_emulator/requests?contains=thing", "", "")
	var reqs []Request
	if err := json.Unmarshal([]byte(body), &reqs); err != nil || len(reqs) != 1 || reqs[0].Path != "/api/thing" {
		t.Fatalf("requests: %v %s", err, body)
	}
	if resp, _ := do(t, c, "GET", srv.URL+"/_emulator/nope", "", ""); resp.StatusCode != 404 {
		t.Fatalf("unknown admin route: %d", resp.StatusCode)
	}
	if _, body := do(t, c, "GET", srv.URL+"/_emulator/", "", ""); !strings.Contains(body, "POST /_emulator/clock") {
		t.Fatalf("index: %s", body)
	}
}

func TestWindow(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &Window{Limit: 2, Period: time.Minute}
	if rem, _, ok := w.Hit(now); !ok || rem != 1 {
		t.Fatalf("first hit: %d %v", rem, ok)
	}
	w.Hit(now)
	rem, reset, ok := w.Hit(now.Add(time.Second))
	if ok || rem != 0 || !reset.Equal(now.Add(time.Minute)) {
		t.Fatalf("third hit: %d %v %v", rem, reset, ok)
	}
	if _, _, ok := w.Hit(now.Add(time.Minute)); !ok {
		t.Fatal("window did not reset")
	}
}

// The request log's writer wrapper passes Flush and Hijack on: a streamed
// answer and a WebSocket upgrade behind Base.Handler work, and are logged.
func TestLoggedWriterStreamsAndUpgrades(t *testing.T) {
	b := NewBase(NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
	a := emutest.NewAgentStandIn()
	srv := httptest.NewServer(b.Handler(toy{Tokens{secret}}, a.For("box"), nil))
	t.Cleanup(func() { a.Release(); b.Close(); srv.Close() })
	host := strings.TrimPrefix(srv.URL, "http://")
	emutest.CheckWebSocket(t, srv.URL, host, "/sockets/events/x", http.Header{"Authorization": {"Bearer " + secret}})
	emutest.CheckStreams(t, a, srv.URL, host, "Authorization", "Bearer "+secret)
	// Each is logged when its handler returns, in either order.
	testsupport.Poll(t, 5*time.Second, func() error {
		got := map[string]int{}
		for _, r := range b.Requests().All() {
			got[r.Path] = r.Status
		}
		if len(got) != 2 || got["/sockets/events/x"] != http.StatusSwitchingProtocols || got["/stream"] != http.StatusOK {
			return fmt.Errorf("logged %v, want the upgrade as 101 and the stream as 200", got)
		}
		return nil
	})
}
