package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/providers/wasm"
	"github.com/canvasapp/companion/secrets"
	"github.com/canvasapp/companion/webhooks"
)

func TestSignAndVerify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"evt_1","type":"delete.done"}`)
	h := webhooks.Sign("whsec_a", now, body)
	if !strings.HasPrefix(h, "t=1800000000,v1=") {
		t.Fatalf("header %q", h)
	}
	cases := []struct {
		name, secret, header string
		body                 []byte
		at                   time.Time
		want                 error
	}{
		{"good", "whsec_a", h, body, now.Add(time.Minute), nil},
		{"tampered body", "whsec_a", h, []byte(`{"id":"evt_1","type":"delete.blocked"}`), now, webhooks.ErrBadSignature},
		{"other secret", "whsec_b", h, body, now, webhooks.ErrBadSignature},
		{"forged", "whsec_a", "t=1800000000,v1=" + strings.Repeat("ab", 32), body, now, webhooks.ErrBadSignature},
		{"replayed late", "whsec_a", h, body, now.Add(webhooks.DefaultTolerance + time.Second), webhooks.ErrTooOld},
		{"from the future", "whsec_a", h, body, now.Add(-webhooks.DefaultTolerance - time.Second), webhooks.ErrTooOld},
		{"no header", "whsec_a", "", body, now, webhooks.ErrNoSignature},
		{"no timestamp", "whsec_a", strings.SplitN(h, ",", 2)[1], body, now, webhooks.ErrNoSignature},
		{"second signature matches", "whsec_a", h + ",v1=00", body, now, nil},
	}
	for _, c := range cases {
		if err := webhooks.Verify(c.secret, c.header, c.body, c.at, webhooks.DefaultTolerance); !errors.Is(err, c.want) {
			t.Errorf("%s: %v; want %v", c.name, err, c.want)
		}
	}
	// A timestamp moved forward with the old signature fails too.
	moved := strings.Replace(h, "t=1800000000", "t=1800000300", 1)
	if err := webhooks.Verify("whsec_a", moved, body, now.Add(300*time.Second), webhooks.DefaultTolerance); !errors.Is(err, webhooks.ErrBadSignature) {
		t.Errorf("re-dated signature: %v", err)
	}
}

func TestBackoff(t *testing.T) {
	low := webhooks.Backoff{Min: time.Second, Max: 10 * time.Second, Rand: func() float64 { return 0 }}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		if got := low.After(i + 1); got != w {
			t.Errorf("attempt %d: %s; want %s", i+1, got, w)
		}
	}
	high := webhooks.Backoff{Min: time.Second, Max: 10 * time.Second, Rand: func() float64 { return 0.999999 }}
	if got := high.After(3); got <= 2*time.Second || got > 2*time.Second+time.Millisecond {
		t.Errorf("attempt 3 with the most jitter: %s; want just over half of 4s", got)
	}
	if got := low.After(1000); got != 10*time.Second {
		t.Errorf("attempt 1000: %s", got)
	}
}

// env is a webhooks service on a real SQLite store and a real sealed
// secret store, with a clock the test moves.
type env struct {
	t     *testing.T
	ctx   context.Context
	store *db.Store
	keys  *secrets.Sealed
	hooks *webhooks.Hooks
	mu    sync.Mutex
	now   time.Time
}

func newEnv(t *testing.T, allowPrivate bool, mutate func(*webhooks.Config)) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), now: time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)}
	st, err := db.Open(e.ctx, filepath.Join(t.TempDir(), "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.store = st
	k, err := secrets.ParseKey(secrets.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	inst, _ := st.InstanceID(e.ctx)
	if e.keys, err = secrets.OpenSealed(e.ctx, st, inst, k); err != nil {
		t.Fatal(err)
	}
	control := webhooks.Control(wasm.PublicOnly)
	if allowPrivate {
		control = nil
	}
	cfg := webhooks.Config{Store: st, Secrets: e.keys, Now: e.clock, HTTP: webhooks.NewClient(control), AllowPrivate: allowPrivate,
		Blocked: wasm.BlockedAddr,
		BaseURL: func() string { return "https://companion.example" }, MaxAttempts: 3, RetryMin: time.Minute, RetryMax: time.Hour,
		Timeout: 5 * time.Second, Lease: time.Minute}
	if mutate != nil {
		mutate(&cfg)
	}
	if e.hooks, err = webhooks.New(cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *env) advance(d time.Duration) {
	e.mu.Lock()
	e.now = e.now.Add(d)
	e.mu.Unlock()
}

// receiver records what it is sent and answers with status().
type receiver struct {
	mu     sync.Mutex
	status int
	got    []*http.Request
	bodies [][]byte
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got, r.bodies = append(r.got, req), append(r.bodies, b)
	w.WriteHeader(r.status)
	io.WriteString(w, "answer\nsecond line")
}

func TestDeliveryRetriesThenDelivers(t *testing.T) {
	e := newEnv(t, true, nil)
	rcv := &receiver{status: 503}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	hook, secret, err := e.hooks.Create(e.ctx, "alice", webhooks.CreateRequest{URL: srv.URL + "/hook?x=1", Events: []string{core.EventDeleteDone}})
	if err != nil {
		t.Fatal(err)
	}
	if stored, err := e.keys.Get(e.ctx, webhooks.SecretKey(hook.ID)); err != nil || stored != secret {
		t.Fatalf("secret in the secret store: %v", err)
	}
	ev := core.Event{ID: core.EventID(core.EventDeleteDone, "ws_1", "7"), Kind: core.EventDeleteDone, Owner: "alice", AccountID: "acc",
		WorkspaceID: "ws_1", ExportID: "exp_1", ExportSHA256: "abc"}
	// An event of another owner, and one this hook did not subscribe to.
	for _, other := range []core.Event{{ID: "evt_b", Kind: core.EventDeleteDone, Owner: "bob"}, {ID: "evt_c", Kind: core.EventExportFailed, Owner: "alice"}} {
		if err := e.hooks.Emit(e.ctx, other); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.hooks.Emit(e.ctx, ev); err != nil {
		t.Fatal(err)
	}
	if err := e.hooks.Emit(e.ctx, ev); err != nil { // the same fact again
		t.Fatal(err)
	}
	if n := e.hooks.Pass(e.ctx); n != 1 {
		t.Fatalf("first pass sent %d; want the one delivery", n)
	}
	ds, err := e.hooks.Deliveries(e.ctx, "alice", hook.ID, 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries %+v, %v", ds, err)
	}
	d := ds[0]
	if d.State != webhooks.StatePending || d.Attempts != 1 || d.LastStatus != 503 || !strings.Contains(d.LastError, "503 answer") ||
		d.NextAt.Before(e.clock().Add(30*time.Second)) || d.NextAt.After(e.clock().Add(time.Minute)) {
		t.Fatalf("after a 503: %+v; want pending, 1 attempt, next within the first backoff", d)
	}
	if n := e.hooks.Pass(e.ctx); n != 0 {
		t.Fatalf("a pass before the backoff ended sent %d", n)
	}
	if _, err := e.hooks.Deliveries(e.ctx, "bob", hook.ID, 10); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("bob reads alice's deliveries: %v", err)
	}
	rcv.mu.Lock()
	rcv.status = 204
	rcv.mu.Unlock()
	e.advance(time.Minute)
	if n := e.hooks.Pass(e.ctx); n != 1 {
		t.Fatalf("pass after the backoff sent %d", n)
	}
	ds, _ = e.hooks.Deliveries(e.ctx, "alice", hook.ID, 10)
	if ds[0].State != webhooks.StateDelivered || ds[0].Attempts != 2 || !ds[0].DeliveredAt.Equal(e.clock()) || ds[0].LastError != "" {
		t.Fatalf("after a 204: %+v", ds[0])
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.got) != 2 {
		t.Fatalf("receiver got %d requests", len(rcv.got))
	}
	for i, r := range rcv.got {
		if err := webhooks.Verify(secret, r.Header.Get(webhooks.HeaderSignature), rcv.bodies[i], e.clock(), webhooks.DefaultTolerance); err != nil {
			t.Errorf("attempt %d: %v", i+1, err)
		}
		if r.Header.Get(webhooks.HeaderIdempotency) != d.ID || r.Header.Get(webhooks.HeaderEventID) != ev.ID || r.Header.Get(webhooks.HeaderEvent) != core.EventDeleteDone {
			t.Errorf("attempt %d headers %v", i+1, r.Header)
		}
		if r.URL.RawQuery != "x=1" {
			t.Errorf("query %q", r.URL.RawQuery)
		}
	}
	var p webhooks.Payload
	if err := json.Unmarshal(rcv.bodies[1], &p); err != nil {
		t.Fatal(err)
	}
	if p.ID != ev.ID || p.Type != core.EventDeleteDone || p.Data.Export == nil || p.Data.Export.ArchiveSHA256 != "abc" ||
		p.Data.Export.URL != "https://companion.example/v1/exports/exp_1" {
		t.Fatalf("payload %s", rcv.bodies[1])
	}
	if string(rcv.bodies[0]) != string(rcv.bodies[1]) {
		t.Error("the body changed between attempts")
	}
}

func TestDeliveryGivesUp(t *testing.T) {
	e := newEnv(t, true, nil)
	srv := httptest.NewServer(&receiver{status: 500})
	defer srv.Close()
	hook, _, err := e.hooks.Create(e.ctx, "alice", webhooks.CreateRequest{URL: srv.URL, Events: []string{core.EventExportFailed}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.hooks.Emit(e.ctx, core.Event{ID: "evt_x", Kind: core.EventExportFailed, Owner: "alice", Reason: "disk full"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if n := e.hooks.Pass(e.ctx); n != 1 {
			t.Fatalf("pass sent %d", n)
		}
		e.advance(time.Hour)
	}
	ds, _ := e.hooks.Deliveries(e.ctx, "alice", hook.ID, 10)
	if ds[0].State != webhooks.StateFailed || ds[0].Attempts != 3 || !strings.Contains(ds[0].LastError, "gave up after 3 attempts") {
		t.Fatalf("after 3 failures: %+v", ds[0])
	}
	if n := e.hooks.Pass(e.ctx); n != 0 {
		t.Fatal("a failed delivery was tried again")
	}
	if p, f, err := e.store.OutboxDepth(e.ctx); err != nil || p != 0 || f != 1 {
		t.Fatalf("depth %d, %d, %v", p, f, err)
	}
	// Kept for KeepDeliveries, then pruned.
	e.hooks.Prune(e.ctx)
	if ds, _ := e.hooks.Deliveries(e.ctx, "alice", hook.ID, 10); len(ds) != 1 {
		t.Fatalf("pruned too early: %+v", ds)
	}
	e.advance(webhooks.KeepDeliveries)
	e.hooks.Prune(e.ctx)
	if ds, _ := e.hooks.Deliveries(e.ctx, "alice", hook.ID, 10); len(ds) != 0 {
		t.Fatalf("not pruned after %s: %+v", webhooks.KeepDeliveries, ds)
	}
}

// TestAddressGuard: without the operator's leave, a private or loopback
// URL is refused when made, and a name that resolves to one is refused
// when dialed; redirects are not followed.
func TestAddressGuard(t *testing.T) {
	e := newEnv(t, false, nil)
	for _, u := range []string{"http://127.0.0.1:9/x", "http://localhost/x", "http://10.1.2.3/", "http://[::1]/", "http://169.254.169.254/latest",
		"ftp://example.com/", "https://user:pw@example.com/", "not a url", ""} {
		if _, _, err := e.hooks.Create(e.ctx, "alice", webhooks.CreateRequest{URL: u, Events: []string{core.EventDeleteDone}}); !core.IsKind(err, core.KindInvalid) {
			t.Errorf("%q: %v; want invalid", u, err)
		}
	}
	if _, _, err := e.hooks.Create(e.ctx, "alice", webhooks.CreateRequest{URL: "https://example.com/h", Events: []string{"delete.maybe"}}); !core.IsKind(err, core.KindInvalid) {
		t.Errorf("unknown event: %v", err)
	}
	if list, _ := e.hooks.List(e.ctx, "alice"); len(list) != 0 {
		t.Fatalf("refused hooks were stored: %+v", list)
	}

	// The dial guard: a URL allowed at creation (as if it were public)
	// that reaches loopback is stopped when dialed.
	srv := httptest.NewServer(&receiver{status: 204})
	defer srv.Close()
	g := newEnv(t, true, func(c *webhooks.Config) { c.HTTP = webhooks.NewClient(wasm.PublicOnly) })
	hook, _, err := g.hooks.Create(g.ctx, "alice", webhooks.CreateRequest{URL: srv.URL, Events: []string{core.EventDeleteDone}})
	if err != nil {
		t.Fatal(err)
	}
	g.hooks.Emit(g.ctx, core.Event{ID: "evt_g", Kind: core.EventDeleteDone, Owner: "alice"})
	g.hooks.Pass(g.ctx)
	ds, _ := g.hooks.Deliveries(g.ctx, "alice", hook.ID, 10)
	if len(ds) != 1 || ds[0].State != webhooks.StatePending || !strings.Contains(ds[0].LastError, "not public") {
		t.Fatalf("loopback dial: %+v", ds)
	}

	// A redirect is an answer, not followed.
	red := httptest.NewServer(http.RedirectHandler(srv.URL, http.StatusTemporaryRedirect))
	defer red.Close()
	r := newEnv(t, true, nil)
	hook, _, _ = r.hooks.Create(r.ctx, "alice", webhooks.CreateRequest{URL: red.URL, Events: []string{core.EventDeleteDone}})
	r.hooks.Emit(r.ctx, core.Event{ID: "evt_r", Kind: core.EventDeleteDone, Owner: "alice"})
	r.hooks.Pass(r.ctx)
	ds, _ = r.hooks.Deliveries(r.ctx, "alice", hook.ID, 10)
	if len(ds) != 1 || ds[0].State != webhooks.StatePending || !strings.Contains(ds[0].LastError, "redirect") {
		t.Fatalf("redirect: %+v", ds)
	}
}

// TestKeepLinkToken: a keep link's token checks only as issued, and not
// after it expires; another's is refused with the same answer.
func TestKeepLinkToken(t *testing.T) {
	e := newEnv(t, true, nil)
	rcv := &receiver{status: 204}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	if _, _, err := e.hooks.Create(e.ctx, "alice", webhooks.CreateRequest{URL: srv.URL, Events: []string{core.EventRetentionWarning}}); err != nil {
		t.Fatal(err)
	}
	at := e.clock().Add(24 * time.Hour)
	if err := e.hooks.Emit(e.ctx, core.Event{ID: "evt_w", Kind: core.EventRetentionWarning, Owner: "alice", WorkspaceID: "ws_1", DeleteAfter: at}); err != nil {
		t.Fatal(err)
	}
	e.hooks.Pass(e.ctx)
	var p webhooks.Payload
	if err := json.Unmarshal(rcv.bodies[0], &p); err != nil {
		t.Fatal(err)
	}
	tok, ok := strings.CutPrefix(p.Data.KeepURL, "https://companion.example"+webhooks.KeepPath)
	if !ok || p.Data.DeleteAfter == nil || !p.Data.DeleteAfter.Equal(at) || p.Data.KeepURLExpiresAt == nil {
		t.Fatalf("payload %s", rcv.bodies[0])
	}
	l, err := e.hooks.CheckKeepLink(e.ctx, tok)
	if err != nil || l.WorkspaceID != "ws_1" || l.Owner != "alice" || !l.DeleteAfter.Equal(at) {
		t.Fatalf("CheckKeepLink: %+v, %v", l, err)
	}
	c64, sig, _ := strings.Cut(tok, ".")
	for _, bad := range []string{"", "x", c64 + ".", "AAAA." + sig, c64 + "." + strings.Repeat("A", len(sig)), tok + "A"} {
		if _, err := e.hooks.CheckKeepLink(e.ctx, bad); !core.IsKind(err, core.KindNotFound) {
			t.Errorf("token %q: %v", bad, err)
		}
	}
	e.advance(24 * time.Hour)
	if _, err := e.hooks.CheckKeepLink(e.ctx, tok); !core.IsKind(err, core.KindNotFound) {
		t.Errorf("expired token: %v", err)
	}
}

// TestLeaseOutlivesEveryAttempt: a delivery whose lease would end before
// an attempt's timeout (earlier ones in its batch were slow) is given back
// untried, so no attempt runs past its lease.
func TestLeaseOutlivesEveryAttempt(t *testing.T) {
	var e *env
	rcv := &receiver{status: 204}
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.advance(56 * time.Second) // this answer took 56 s of the 60 s lease; an attempt has 5 s
		rcv.ServeHTTP(w, r)
	}))
	defer slow.Close()
	e = newEnv(t, true, func(c *webhooks.Config) { c.Parallel = 1 }) // one after the other, as behind a slow receiver
	hook, _, err := e.hooks.Create(e.ctx, "alice", webhooks.CreateRequest{URL: slow.URL, Events: []string{core.EventDeleteDone}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"evt_1", "evt_2"} {
		if err := e.hooks.Emit(e.ctx, core.Event{ID: id, Kind: core.EventDeleteDone, Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.hooks.Pass(e.ctx); n != 2 {
		t.Fatalf("claimed %d; want both in one batch", n)
	}
	ds, _ := e.hooks.Deliveries(e.ctx, "alice", hook.ID, 10)
	states := map[string]int{}
	for _, d := range ds {
		states[fmt.Sprintf("%s/%d", d.State, d.Attempts)]++
	}
	if states["delivered/1"] != 1 || states["pending/0"] != 1 {
		t.Fatalf("after the slow answer: %v; want one delivered, one given back untried", states)
	}
	if n := e.hooks.Pass(e.ctx); n != 1 {
		t.Fatalf("the given-back delivery was not claimable at once: %d", n)
	}
}

// TestSlowReceiverHoldsBackNobody: while one receiver sits on its
// request, another's delivery of the same pass goes out.
func TestSlowReceiverHoldsBackNobody(t *testing.T) {
	e := newEnv(t, true, nil)
	stuck, release := make(chan struct{}), make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(stuck)
		<-release
		w.WriteHeader(204)
	}))
	defer slow.Close()
	fast := &receiver{status: 204}
	fastSrv := httptest.NewServer(fast)
	defer fastSrv.Close()
	for _, who := range []struct{ owner, url string }{{"alice", slow.URL}, {"bob", fastSrv.URL}} {
		if _, _, err := e.hooks.Create(e.ctx, who.owner, webhooks.CreateRequest{URL: who.url, Events: []string{core.EventDeleteDone}}); err != nil {
			t.Fatal(err)
		}
		if err := e.hooks.Emit(e.ctx, core.Event{ID: "evt_" + who.owner, Kind: core.EventDeleteDone, Owner: who.owner}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan int)
	go func() { done <- e.hooks.Pass(e.ctx) }()
	<-stuck
	for {
		fast.mu.Lock()
		n := len(fast.got)
		fast.mu.Unlock()
		if n == 1 {
			break
		}
		select {
		case <-done:
			t.Fatal("the pass ended with the slow receiver still holding its request")
		case <-time.After(10 * time.Millisecond):
		}
	}
	close(release)
	if n := <-done; n != 2 {
		t.Fatalf("pass claimed %d", n)
	}
}
