package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport/fakeclock"
)

func TestStateTransitions(t *testing.T) {
	for _, s := range []State{StateCreating, StateRunning, StatePausing, StatePaused, StateResuming, StateDeleting, StateDeleted, StateError, StateUnknown} {
		if !s.Valid() {
			t.Errorf("%s not valid", s)
		}
	}
	if State("sleeping").Valid() {
		t.Error("made-up state is valid")
	}
	if !StateRunning.canPause() || StatePaused.canPause() || StatePausing.canPause() {
		t.Error("only running workspaces may be paused")
	}
	if !StatePaused.canResume() || StateRunning.canResume() {
		t.Error("only paused workspaces may be resumed")
	}
	for _, s := range []State{StateCreating, StatePausing, StateResuming, StateDeleting} {
		if s.canDelete() {
			t.Errorf("delete allowed while %s", s)
		}
	}
}

func TestErrorKinds(t *testing.T) {
	base := &Error{Kind: KindRateLimited, Message: "slow down", RetryAfter: 7 * time.Second}
	wrapped := fmt.Errorf("list boxes: %w", base)
	if KindOf(wrapped) != KindRateLimited || RetryAfterOf(wrapped) != 7*time.Second {
		t.Fatalf("kind/retry-after lost through wrapping: %v %v", KindOf(wrapped), RetryAfterOf(wrapped))
	}
	if KindOf(errors.New("boom")) != KindInternal || KindOf(nil) != "" {
		t.Fatal("plain errors are internal, nil has no kind")
	}
	if !transient(base) || transient(Errorf(KindInvalid, "no")) {
		t.Fatal("rate limits are transient, invalid input is not")
	}
}

func TestBackoffHonoursRetryAfter(t *testing.T) {
	for attempt := 1; attempt < 20; attempt++ {
		d := backoff(attempt, 0)
		if d <= 0 || d > 6*time.Minute {
			t.Fatalf("attempt %d: backoff %v out of range", attempt, d)
		}
	}
	if d := backoff(1, 90*time.Second); d < 90*time.Second {
		t.Fatalf("backoff %v shorter than Retry-After", d)
	}
	if backoff(8, 0) <= backoff(1, 0) {
		t.Fatal("backoff does not grow")
	}
}

func TestChangedIgnoresJitter(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	a := Workspace{ID: "ws_1", State: StateRunning, LastActivityAt: now, Size: &Size{Bytes: 100, Source: SizeDockerEngineUsed, At: now}}
	b := a
	b.LastActivityAt = now.Add(time.Second)
	sz := *a.Size
	sz.At = now.Add(time.Minute)
	b.Size = &sz
	if changed(a, b) {
		t.Fatal("one second of activity jitter and a fresh same-size measurement are not changes")
	}
	b.LastActivityAt = now.Add(time.Minute)
	if !changed(a, b) {
		t.Fatal("a minute of new activity is a change")
	}
	c := a
	c.State = StatePaused
	if !changed(a, c) {
		t.Fatal("state change not seen")
	}
	d := a
	sz2 := *a.Size
	sz2.Bytes = 200
	d.Size = &sz2
	if !changed(a, d) {
		t.Fatal("size change not seen")
	}
}

func TestChangedSincePlan(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	plan := DeletePlan{State: StatePaused, BoxID: "b1", LastActivityAt: now}
	ws := Workspace{State: StatePaused, BoxID: "b1", LastActivityAt: now.Add(time.Second)}
	if r := changedSince(plan, ws); r != "" {
		t.Fatalf("unchanged workspace refused: %s", r)
	}
	ws.State = StateRunning
	if r := changedSince(plan, ws); !strings.Contains(r, "now running") {
		t.Fatalf("resumed workspace not refused: %q", r)
	}
	ws.State, ws.BoxID = StatePaused, "b2"
	if r := changedSince(plan, ws); !strings.Contains(r, "box changed") {
		t.Fatalf("new identity not refused: %q", r)
	}
	ws.BoxID, ws.LastActivityAt = "b1", now.Add(time.Minute)
	if r := changedSince(plan, ws); !strings.Contains(r, "used since") {
		t.Fatalf("new activity not refused: %q", r)
	}
	// A figure read later may drift past the preview's measurement, but
	// activity dated before the preview was made is not use since.
	plan.CreatedAt = now.Add(time.Minute)
	ws.LastActivityAt = now.Add(50 * time.Second)
	if r := changedSince(plan, ws); r != "" {
		t.Fatalf("activity before the preview refused: %s", r)
	}
	ws.LastActivityAt = plan.CreatedAt.Add(-time.Second)
	if r := changedSince(plan, ws); !strings.Contains(r, "used since") {
		t.Fatalf("activity after the preview not refused: %q", r)
	}
}

func TestConsequencesSayWhatIsLost(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	ws := Workspace{BoxID: "b1", Provider: "docker", State: StateRunning, Size: &Size{Bytes: 3 << 20, Source: SizeDockerEngineUsed, At: at}}
	lost, survives := consequences(ws, ProviderInfo{}, DeleteExportPlan{Why: "exports are not configured"})
	all := strings.Join(lost, "\n")
	for _, want := range []string{"b1", "3.0 MiB", "docker_engine:used", "memory", "history"} {
		if !strings.Contains(all, want) {
			t.Errorf("lost %q does not mention %q", all, want)
		}
	}
	if len(survives) == 0 {
		t.Error("nothing said about what survives")
	}
	ws.State = StatePaused
	lost, _ = consequences(ws, ProviderInfo{Capabilities: Capabilities{SuspendKeepsMemory: true}}, DeleteExportPlan{})
	if !strings.Contains(strings.Join(lost, "\n"), "memory state kept by the pause") {
		t.Errorf("paused-with-memory loss not stated: %v", lost)
	}
}

func TestValidateCreate(t *testing.T) {
	cases := map[string]CreateRequest{
		"name is required":  {Name: "  "},
		"longer than 100":   {Name: strings.Repeat("x", 101)},
		"must not be negat": {Name: "a", Lifecycle: Lifecycle{IdlePauseAfter: -time.Second}},
		"names are 1-64":    {Name: "a", Options: map[string]string{"": "x"}},
	}
	for want, req := range cases {
		err := validateCreate(req)
		if !IsKind(err, KindInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("validateCreate(%+v) = %v, want invalid %q", req, err, want)
		}
	}
	if err := validateCreate(CreateRequest{Name: "ok", Options: map[string]string{"image": "x"}}); err != nil {
		t.Fatal(err)
	}
}

func TestValidateAccount(t *testing.T) {
	info := ProviderInfo{Name: "p", Credentials: []CredentialSpec{{Name: "api_key"}}, Config: []ConfigField{{Name: "region", Required: true}, {Name: "base_url"}}}
	ok := AddAccountRequest{Provider: "p", Config: map[string]string{"region": "eu"}, Credentials: map[string]string{"api_key": "k"}}
	if err := validateAccount(info, ok); err != nil {
		t.Fatal(err)
	}
	bad := []AddAccountRequest{
		{Provider: "p", Config: map[string]string{}, Credentials: map[string]string{"api_key": "k"}},
		{Provider: "p", Config: map[string]string{"region": "eu", "zone": "x"}, Credentials: map[string]string{"api_key": "k"}},
		{Provider: "p", Config: map[string]string{"region": "eu"}},
		{Provider: "p", Config: map[string]string{"region": "eu"}, Credentials: map[string]string{"api_key": "k", "other": "v"}},
		{Provider: "p", Config: map[string]string{"region": "eu"}, Credentials: map[string]string{"api_key": strings.Repeat("k", maxSecretLen+1)}},
	}
	for i, req := range bad {
		if err := validateAccount(info, req); !IsKind(err, KindInvalid) {
			t.Errorf("case %d: %v, want invalid", i, err)
		}
	}
	// The message must never echo a credential value.
	err := validateAccount(info, AddAccountRequest{Config: map[string]string{"region": "eu"}, Credentials: map[string]string{"api_key": "k", "leaky": "s3cr3t"}})
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("error %v leaks or is missing", err)
	}
}

func TestLocks(t *testing.T) {
	var l locks
	u1, ok := l.tryLock("a")
	if !ok {
		t.Fatal("free lock not taken")
	}
	if _, ok := l.tryLock("a"); ok {
		t.Fatal("held lock taken twice")
	}
	if _, ok := l.tryLock("b"); !ok {
		t.Fatal("locks are per workspace")
	}
	u1()
	u1() // releasing twice is harmless
	if _, ok := l.tryLock("a"); !ok {
		t.Fatal("released lock not free")
	}
}

func TestRegistry(t *testing.T) {
	var r Registry
	if _, ok := r.Lookup("x"); ok || len(r.Names()) != 0 {
		t.Fatal("zero registry not empty")
	}
}

func TestIDsAndTokens(t *testing.T) {
	a, b := NewID("ws"), NewID("ws")
	if a == b || !strings.HasPrefix(a, "ws_") || len(a) != 3+16 {
		t.Fatalf("ids %q %q", a, b)
	}
	tok := newToken()
	if len(tok) < 40 || HashToken(tok) == tok || len(HashToken(tok)) != 64 {
		t.Fatalf("token %q hash %q", tok, HashToken(tok))
	}
}

func TestLockWithinWaitsForRelease(t *testing.T) {
	clk := fakeclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	l := locks{clock: clk}
	unlock, _ := l.tryLock("a")
	got := make(chan bool, 1)
	go func() {
		u, ok := l.lockWithin("a", 10*time.Second)
		if ok {
			defer u()
		}
		got <- ok
	}()
	// Release once the waiter is waiting, with time still left.
	if !clk.WaitForWaiters(1, 10*time.Second) {
		t.Fatal("lockWithin is not waiting on the clock")
	}
	clk.Advance(9 * time.Second)
	unlock()
	if !<-got {
		t.Fatal("lock released during the wait was not taken")
	}

	held, _ := l.tryLock("a")
	defer held()
	go func() {
		_, ok := l.lockWithin("a", 10*time.Millisecond)
		got <- ok
	}()
	if !clk.WaitForWaiters(1, 10*time.Second) {
		t.Fatal("lockWithin is not waiting on the clock")
	}
	select {
	case <-got:
		t.Fatal("lockWithin gave up before its time was up")
	default:
	}
	clk.Advance(10 * time.Millisecond)
	if <-got {
		t.Fatal("held lock taken after the wait")
	}
}

func TestClockTimeoutEndsOnTheClock(t *testing.T) {
	clk := fakeclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	ctx, cancel := withClockTimeout(context.Background(), clk, time.Minute)
	defer cancel()
	if d, ok := ctx.Deadline(); !ok || !d.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("deadline %v %v", d, ok)
	}
	if !clk.WaitForWaiters(1, 10*time.Second) {
		t.Fatal("no timer armed")
	}
	clk.Advance(59 * time.Second)
	select {
	case <-ctx.Done():
		t.Fatal("ended early")
	default:
	}
	clk.Advance(time.Second)
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !transient(ctx.Err()) {
		t.Fatalf("err %v, want deadline exceeded (a transient failure)", ctx.Err())
	}
	ctx2, cancel2 := withClockTimeout(context.Background(), clk, time.Minute)
	cancel2()
	if !errors.Is(ctx2.Err(), context.Canceled) {
		t.Fatalf("cancelled: %v", ctx2.Err())
	}
}

func TestPassBackoff(t *testing.T) {
	unavailable := Errorf(KindUnavailable, "down")
	prev := time.Duration(0)
	for failures := 1; failures <= 4; failures++ {
		d := passBackoff(15*time.Second, time.Hour, failures, unavailable)
		base := 15 * time.Second << failures
		if d < base*8/10 || d > base*12/10 || d <= prev {
			t.Fatalf("failure %d: wait %v, want %v ±20%% and growing", failures, d, base)
		}
		prev = d
	}
	if d := passBackoff(15*time.Second, time.Minute, 30, unavailable); d > 72*time.Second {
		t.Fatalf("wait %v above MaxBackoff (+20%% jitter)", d)
	}
	limited := &Error{Kind: KindRateLimited, RetryAfter: 10 * time.Minute}
	if d := passBackoff(15*time.Second, time.Minute, 1, limited); d < 10*time.Minute {
		t.Fatalf("wait %v shorter than Retry-After", d)
	}
}

func TestCheckLifecycleRefusesWhatNobodyEnforces(t *testing.T) {
	none := ProviderInfo{Name: "docker"}
	if err := checkLifecycle(none, Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	if err := checkLifecycle(none, Lifecycle{IdlePauseAfter: time.Minute}); !IsKind(err, KindInvalid) || !strings.Contains(err.Error(), "idle_pause_after") {
		t.Fatalf("idle pause on a provider without it: %v", err)
	}
	if err := checkLifecycle(none, Lifecycle{PausedTTL: time.Hour}); !IsKind(err, KindInvalid) {
		t.Fatalf("paused TTL on a provider without it: %v", err)
	}
	native := ProviderInfo{Capabilities: Capabilities{NativeIdlePause: true, NativePausedTTL: true}}
	if err := checkLifecycle(native, Lifecycle{IdlePauseAfter: time.Minute, PausedTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
}
