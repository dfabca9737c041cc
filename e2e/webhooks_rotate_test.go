package e2e

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/hookreceiver"
)

// TestWebhooksRotateSecret drives a secret rotation through the built
// binary in serve mode: after a rotation with the default grace period a
// delivery (an account.unhealthy, when the account's provider stops
// answering) verifies, the documented way, with the new secret and with
// the old one, and the list says until when the old one is accepted;
// after a rotation with previous_valid_for 0 the next delivery verifies
// with the newest secret only, and the list says there is no previous one.
func TestWebhooksRotateSecret(t *testing.T) {
	rcv := hookreceiver.Start(t)
	p := start(t, options{mode: "serve", dataDir: t.TempDir(), args: []string{"--listen", "127.0.0.1:0", "--reconcile-interval", "1s",
		"--webhooks-allow-private", "--webhook-retry-min", "100ms", "--webhook-retry-max", "300ms"}})
	type hook struct {
		wireHook
		PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
	}
	var created struct {
		Webhook hook   `json:"webhook"`
		Secret  string `json:"secret"`
	}
	p.must(201, "POST", "/v1/webhooks", map[string]any{"url": rcv.URL, "events": []string{"account.unhealthy"}}, &created)
	if created.Webhook.PreviousSecretExpiresAt != nil {
		t.Fatalf("a new webhook has a previous secret until %v", created.Webhook.PreviousSecretExpiresAt)
	}
	rotatePath := "/v1/webhooks/" + created.Webhook.ID + "/rotate-secret"
	p.must(400, "POST", rotatePath, map[string]any{"previous_valid_for": 8 * 24 * 3600}, nil)
	p.must(404, "POST", "/v1/webhooks/wh_nobody/rotate-secret", nil, nil)
	listed := func() *time.Time {
		t.Helper()
		var list struct{ Webhooks []hook }
		raw := p.must(200, "GET", "/v1/webhooks", nil, &list)
		if len(list.Webhooks) != 1 {
			t.Fatalf("list %s", raw)
		}
		return list.Webhooks[0].PreviousSecretExpiresAt
	}
	rotate := func(body any) (string, *time.Time) {
		t.Helper()
		var got struct {
			Webhook hook   `json:"webhook"`
			Secret  string `json:"secret"`
		}
		p.must(200, "POST", rotatePath, body, &got)
		if got.Webhook.ID != created.Webhook.ID || !strings.HasPrefix(got.Secret, "whsec_") {
			t.Fatalf("rotate: %+v", got)
		}
		return got.Secret, got.Webhook.PreviousSecretExpiresAt
	}
	// unhealthy adds a Daytona account and stops its provider answering,
	// and returns the account.unhealthy delivery about it.
	unhealthy := func(label string) hookreceiver.Event {
		t.Helper()
		dt := daytona.New(daytona.Options{Token: sealedToken, Clock: emulator.NewWallClock(), Delays: &daytona.Delays{}})
		api := httptest.NewServer(dt.Handler())
		t.Cleanup(func() { dt.Close(); api.Close() })
		var acct struct{ Account struct{ ID string } }
		p.must(201, "POST", "/v1/accounts", map[string]any{"provider": "daytona", "label": label,
			"config": map[string]string{"api_url": api.URL + "/api"}, "credentials": map[string]string{"token": sealedToken}}, &acct)
		api.Close()
		var ev hookreceiver.Event
		testsupport.Poll(t, 90*time.Second, func() error {
			for _, e := range rcv.Events("account.unhealthy") {
				if strings.Contains(string(e.Data), acct.Account.ID) {
					ev = e
					return nil
				}
			}
			refused, _, _ := rcv.Stats()
			return fmt.Errorf("no account.unhealthy for %s accepted yet (%d refused)", acct.Account.ID, refused)
		})
		return ev
	}
	v1s := func(sig string) int { return strings.Count(sig, "v1=") }

	// Rotated with the default grace period: the new secret first, the
	// old one still accepted for about a day.
	before := time.Now()
	s1, until := rotate(nil)
	after := time.Now()
	if s1 == created.Secret || until == nil || until.Before(before.Add(24*time.Hour).Truncate(time.Second)) || until.After(after.Add(24*time.Hour)) {
		t.Fatalf("rotated: secret changed %v, previous until %v; want a new secret and the old one for 24 h", s1 != created.Secret, until)
	}
	if l := listed(); l == nil || !l.Equal(*until) {
		t.Fatalf("listed previous until %v; want %v", l, until)
	}
	rcv.SetSecret(s1)
	ev := unhealthy("first")
	if v1s(ev.Signature) != 2 || !hookreceiver.Verify(s1, ev.Signature, ev.Raw, ev.At) || !hookreceiver.Verify(created.Secret, ev.Signature, ev.Raw, ev.At) {
		t.Fatalf("delivery in the grace period signed %q: want two signatures, verified by the new and by the old secret", ev.Signature)
	}

	// Rotated with previous_valid_for 0: the last secret stops at once.
	s2, until := rotate(map[string]any{"previous_valid_for": 0})
	if s2 == s1 || until != nil || listed() != nil {
		t.Fatalf("rotated without grace: previous until %v, listed %v; want none", until, listed())
	}
	rcv.SetSecret(s2)
	ev = unhealthy("second")
	if v1s(ev.Signature) != 1 || !hookreceiver.Verify(s2, ev.Signature, ev.Raw, ev.At) || hookreceiver.Verify(s1, ev.Signature, ev.Raw, ev.At) {
		t.Fatalf("delivery after revoking signed %q: want one signature, by the newest secret only", ev.Signature)
	}
	if refused, _, dups := rcv.Stats(); refused != 0 || len(dups) != 0 {
		t.Fatalf("receiver refused %d, duplicates %v; want none", refused, dups)
	}
}
