package e2e

import (
	"syscall"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport/hookreceiver"
)

// TestWebhooksExportFailedAfterRestart: companion serve is killed
// (SIGKILL, at the test-only crash point once the export has staged a
// file) in the middle of a person's export. Started again on the same data
// dir it fails the export, and the person's webhook receives a signed
// export.failed naming that export, with the reason the record gives,
// once.
func TestWebhooksExportFailedAfterRestart(t *testing.T) {
	image, scope := boxImage(t), dockerScope(t)
	rcv := hookreceiver.Start(t)
	data := t.TempDir()
	args := []string{"--docker-image", image, "--docker-scope", scope, "--reconcile-interval", "1h",
		"--webhooks-allow-private", "--webhook-retry-min", "100ms", "--webhook-retry-max", "300ms"}
	p := start(t, options{mode: "serve", dataDir: data, args: args, env: []string{"COMPANION_TEST_CRASH_AT=export:staged"}})
	var created struct {
		Webhook wireHook `json:"webhook"`
		Secret  string   `json:"secret"`
	}
	p.must(201, "POST", "/v1/webhooks", map[string]any{"url": rcv.URL, "events": []string{"export.failed"}}, &created)
	rcv.SetSecret(created.Secret)
	ws := p.createRunning("interrupted")["interrupted"]

	var started struct{ Export exportRec }
	p.must(202, "POST", "/v1/workspaces/"+ws.ID+"/export", nil, &started)
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("companion did not crash in the export\n%s", p.stderr.String())
	}
	if st, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || st.Signal() != syscall.SIGKILL {
		t.Fatalf("companion ended with %v, want SIGKILL at the crash point", p.exit)
	}
	if n := len(rcv.Events("")); n != 0 {
		t.Fatalf("%d events before the restart, want none", n)
	}

	p = start(t, options{mode: "serve", dataDir: data, args: args})
	ev := waitEvents(t, rcv, "export.failed", ws.ID)[ws.ID]
	d := dataOf(t, ev)
	var rec struct{ Export exportRec }
	p.must(200, "GET", "/v1/exports/"+started.Export.ID, nil, &rec)
	if rec.Export.State != "failed" || rec.Export.Verified || rec.Export.Error == nil {
		t.Fatalf("the interrupted export after the restart: %+v, want failed with a reason", rec.Export)
	}
	if ev.ID != core.EventID(core.EventExportFailed, started.Export.ID) || d.Export == nil || d.Export.ID != started.Export.ID ||
		d.Export.URL != p.ready.URL+"/v1/exports/"+started.Export.ID || d.Reason != *rec.Export.Error {
		t.Fatalf("export.failed %s: want the interrupted export %s, its location and the record's reason %q", ev.Raw, started.Export.ID, *rec.Export.Error)
	}
	if !hookreceiver.Verify(created.Secret, ev.Signature, ev.Raw, ev.At) {
		t.Fatal("the delivery's signature does not verify")
	}
	// A further restart stores nothing more: recovery runs before the API
	// answers, so the list already holds whatever it stored.
	p.term()
	p = start(t, options{mode: "serve", dataDir: data, args: args})
	var ds struct{ Deliveries []wireDelivery }
	p.must(200, "GET", "/v1/webhooks/"+created.Webhook.ID+"/deliveries", nil, &ds)
	if len(ds.Deliveries) != 1 || ds.Deliveries[0].EventID != ev.ID {
		t.Fatalf("deliveries after a second restart: %+v; want only the one export.failed", ds.Deliveries)
	}
	if refused, _, dups := rcv.Stats(); refused != 0 || len(dups) != 0 {
		t.Fatalf("receiver: %d refused signatures, duplicates %v; want none", refused, dups)
	}
}
