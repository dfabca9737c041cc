package webhooks_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/webhooks"
)

// v1s returns a signature header's v1 entries, in order.
func v1s(header string) []string {
	var out []string
	for _, part := range strings.Split(header, ",") {
		if v, ok := strings.CutPrefix(part, "v1="); ok {
			out = append(out, v)
		}
	}
	return out
}

func TestSignAllOrder(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"evt_1"}`)
	if one, all := webhooks.Sign("whsec_new", now, body), webhooks.SignAll([]string{"whsec_new"}, now, body); one != all {
		t.Fatalf("one secret: Sign %q, SignAll %q", one, all)
	}
	h := webhooks.SignAll([]string{"whsec_new", "whsec_old"}, now, body)
	sigs := v1s(h)
	if !strings.HasPrefix(h, "t=1800000000,v1=") || len(sigs) != 2 {
		t.Fatalf("header %q: want t then two v1 entries", h)
	}
	if want := v1s(webhooks.Sign("whsec_new", now, body))[0]; sigs[0] != want {
		t.Errorf("first v1 %s; want the new secret's %s", sigs[0], want)
	}
	if want := v1s(webhooks.Sign("whsec_old", now, body))[0]; sigs[1] != want {
		t.Errorf("second v1 %s; want the old secret's %s", sigs[1], want)
	}
	for _, s := range []string{"whsec_new", "whsec_old"} {
		if err := webhooks.Verify(s, h, body, now, webhooks.DefaultTolerance); err != nil {
			t.Errorf("verify with %s: %v", s, err)
		}
	}
	if err := webhooks.Verify("whsec_other", h, body, now, webhooks.DefaultTolerance); err == nil {
		t.Error("a third secret verifies")
	}
}

// TestRotateSecret: after a rotation a delivery already in the outbox is
// signed at send time with the new secret and the old one, in that order;
// once the grace period is over only with the new one, and the old secret
// leaves the secret store; a rotation with no grace stops the old one at
// once; another owner cannot rotate; deleting the hook removes both.
func TestRotateSecret(t *testing.T) {
	e := newEnv(t, true, nil)
	rcv := &receiver{status: 204}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	hook, s0, err := e.hooks.Create(e.ctx, "alice", webhooks.CreateRequest{URL: srv.URL, Events: []string{core.EventDeleteDone}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	// send emits one event (to the outbox), runs mutate, then sends it and
	// returns its signature header.
	send := func(mutate func()) string {
		t.Helper()
		n++
		ev := core.Event{ID: "evt_" + string(rune('a'+n)), Kind: core.EventDeleteDone, Owner: "alice", WorkspaceID: "ws_1"}
		if err := e.hooks.Emit(e.ctx, ev); err != nil {
			t.Fatal(err)
		}
		if mutate != nil {
			mutate()
		}
		if got := e.hooks.Pass(e.ctx); got != 1 {
			t.Fatalf("pass sent %d", got)
		}
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		if len(rcv.got) != n {
			t.Fatalf("receiver has %d requests; want %d", len(rcv.got), n)
		}
		return rcv.got[n-1].Header.Get(webhooks.HeaderSignature)
	}
	verifies := func(secret, header string) bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		return webhooks.Verify(secret, header, rcv.bodies[len(rcv.bodies)-1], e.clock(), webhooks.DefaultTolerance) == nil
	}
	prevUntil := func() time.Time {
		t.Helper()
		list, err := e.hooks.List(e.ctx, "alice")
		if err != nil || len(list) != 1 {
			t.Fatalf("list %+v, %v", list, err)
		}
		return list[0].PreviousSecretUntil
	}
	prevStored := func() bool {
		_, err := e.keys.Get(e.ctx, webhooks.PreviousSecretKey(hook.ID))
		if err != nil && !core.IsKind(err, core.KindNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	if h := send(nil); len(v1s(h)) != 1 || !verifies(s0, h) {
		t.Fatalf("before a rotation: %q; want one v1, by the secret", h)
	}

	if _, _, err := e.hooks.Rotate(e.ctx, "bob", hook.ID, time.Hour); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("bob rotates alice's hook: %v; want not found", err)
	}
	for _, bad := range []time.Duration{-time.Second, webhooks.MaxPreviousValidFor + time.Second} {
		if _, _, err := e.hooks.Rotate(e.ctx, "alice", hook.ID, bad); !core.IsKind(err, core.KindInvalid) {
			t.Fatalf("grace %s: %v; want invalid", bad, err)
		}
	}
	var s1 string
	h := send(func() {
		var rotated webhooks.Hook
		if rotated, s1, err = e.hooks.Rotate(e.ctx, "alice", hook.ID, time.Hour); err != nil {
			t.Fatal(err)
		}
		if want := e.clock().Add(time.Hour); !rotated.PreviousSecretUntil.Equal(want) || !prevUntil().Equal(want) {
			t.Fatalf("previous secret until %v (listed %v); want %v", rotated.PreviousSecretUntil, prevUntil(), want)
		}
	})
	if s1 == s0 || !strings.HasPrefix(s1, "whsec_") {
		t.Fatalf("new secret %q", s1)
	}
	sigs := v1s(h)
	if len(sigs) != 2 || !verifies(s1, h) || !verifies(s0, h) {
		t.Fatalf("in the grace period: %q; want two v1, verified by the new and the old secret", h)
	}
	ts := strings.Split(h, ",")[0]
	if !verifies(s1, ts+",v1="+sigs[0]) || !verifies(s0, ts+",v1="+sigs[1]) {
		t.Fatalf("%q: want the new secret's v1 first, the old one's second", h)
	}

	e.advance(time.Hour)
	if u := prevUntil(); !u.IsZero() {
		t.Fatalf("listed after the grace period: %v; want none", u)
	}
	if !prevStored() {
		t.Fatal("the old secret left the secret store before a delivery needed it")
	}
	if h := send(nil); len(v1s(h)) != 1 || !verifies(s1, h) || verifies(s0, h) {
		t.Fatalf("after the grace period: %q; want one v1, by the new secret only", h)
	}
	if prevStored() {
		t.Error("the expired old secret is still in the secret store")
	}
	if got, err := e.store.Webhook(e.ctx, hook.ID); err != nil || !got.PreviousSecretUntil.IsZero() {
		t.Errorf("stored hook %+v, %v: want no previous secret", got, err)
	}

	// Rotated with grace, then again with none: the second-to-last
	// secret stops at once.
	_, s2, err := e.hooks.Rotate(e.ctx, "alice", hook.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rotated, s3, err := e.hooks.Rotate(e.ctx, "alice", hook.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !rotated.PreviousSecretUntil.IsZero() || !prevUntil().IsZero() || prevStored() {
		t.Fatalf("revoked: until %v, listed %v, stored %v; want none", rotated.PreviousSecretUntil, prevUntil(), prevStored())
	}
	if h := send(nil); len(v1s(h)) != 1 || !verifies(s3, h) || verifies(s2, h) || verifies(s1, h) {
		t.Fatalf("after a rotation without grace: %q; want one v1, by the newest secret", h)
	}

	// Deleting the hook during a grace period removes both secrets.
	if _, _, err := e.hooks.Rotate(e.ctx, "alice", hook.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	if !prevStored() {
		t.Fatal("no previous secret stored in the grace period")
	}
	if err := e.hooks.Delete(e.ctx, "alice", hook.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.keys.Get(e.ctx, webhooks.SecretKey(hook.ID)); !core.IsKind(err, core.KindNotFound) || prevStored() {
		t.Fatalf("after delete: secret %v, previous stored %v; want both gone", err, prevStored())
	}
}
