package e2e

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/hookreceiver"
)

// TestReplicasWebhookSenderDies: two replicas on PostgreSQL share one
// outbox. An account's provider stops answering, so an account.unhealthy
// event is stored; the replica that claims its delivery is caught mid-send
// (the receiver holds the request) and killed. The other replica sends it
// once the lease ends, with the same Idempotency-Key; the receiver accepts
// it once, and the deliveries route says delivered after one recorded
// attempt (the killed one never recorded an outcome).
func TestReplicasWebhookSenderDies(t *testing.T) {
	dt := daytona.New(daytona.Options{Token: sealedToken, Clock: emulator.NewWallClock(), Delays: &daytona.Delays{}})
	api := httptest.NewServer(dt.Handler())
	t.Cleanup(func() { dt.Close(); api.Close() })
	rcv := hookreceiver.Start(t)
	rs := startReplicas(t, 2, replicaOpts{Args: []string{"--reconcile-interval", "1s", "--lease-ttl", "2s",
		"--webhooks-allow-private", "--webhook-retry-min", "100ms", "--webhook-retry-max", "300ms"}})
	c := rs.client(rs.Proxy)
	var created struct {
		Webhook wireHook `json:"webhook"`
		Secret  string   `json:"secret"`
	}
	c.must(201, "POST", "/v1/webhooks", map[string]any{"url": rcv.URL, "events": []string{"account.unhealthy"}}, &created)
	rcv.SetSecret(created.Secret)
	var acct struct{ Account struct{ ID string } }
	c.must(201, "POST", "/v1/accounts", map[string]any{"provider": "daytona", "label": "goes away",
		"config": map[string]string{"api_url": api.URL + "/api"}, "credentials": map[string]string{"token": sealedToken}}, &acct)
	held := rcv.HoldNext()
	api.Close() // the provider stops answering

	var h hookreceiver.Held
	select {
	case h = <-held:
	case <-time.After(90 * time.Second):
		t.Fatal("no delivery of account.unhealthy reached the receiver")
	}
	victim := replicaOwning(t, rs, h.Remote)
	t.Logf("replica %d is sending %s; killing it", victim, h.Key)
	rs.kill(victim)

	var ev hookreceiver.Event
	testsupport.Poll(t, 90*time.Second, func() error {
		evs := rcv.Events("account.unhealthy")
		if len(evs) == 0 {
			return fmt.Errorf("the surviving replica has not sent it yet")
		}
		ev = evs[0]
		return nil
	})
	if ev.Key != h.Key {
		t.Fatalf("the delivery came with Idempotency-Key %s; the held one had %s", ev.Key, h.Key)
	}
	if d := dataOf(t, ev); !strings.Contains(string(ev.Data), acct.Account.ID) || d.Reason == "" {
		t.Fatalf("account.unhealthy %s", ev.Raw)
	}
	survivor := rs.client(rs.Replicas[1-victim].ready.URL)
	testsupport.Poll(t, 30*time.Second, func() error {
		var ds struct{ Deliveries []wireDelivery }
		survivor.must(200, "GET", "/v1/webhooks/"+created.Webhook.ID+"/deliveries", nil, &ds)
		if len(ds.Deliveries) != 1 || ds.Deliveries[0].State != "delivered" || ds.Deliveries[0].Attempts != 1 {
			return fmt.Errorf("deliveries %+v; want the one, delivered after 1 recorded attempt", ds.Deliveries)
		}
		return nil
	})
	if refused, _, dups := rcv.Stats(); refused != 0 || len(dups) != 0 || len(rcv.Events("")) != 1 {
		t.Fatalf("receiver: %d refused, duplicates %v, %d events; want 0, none, 1", refused, dups, len(rcv.Events("")))
	}
}

// replicaOwning returns the index of the replica whose process has the
// TCP connection whose local end is addr ("127.0.0.1:PORT"), from /proc.
func replicaOwning(t *testing.T, rs *replicaSet, addr string) int {
	t.Helper()
	_, p, _ := strings.Cut(addr, ":")
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("remote address %q", addr)
	}
	var inodes []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 {
				continue
			}
			_, lp, _ := strings.Cut(fs[1], ":")
			if n, err := strconv.ParseInt(lp, 16, 32); err == nil && int(n) == port {
				inodes = append(inodes, "socket:["+fs[9]+"]")
			}
		}
	}
	for i, r := range rs.Replicas {
		if r == nil {
			continue
		}
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", r.cmd.Process.Pid))
		for _, fd := range fds {
			link, err := os.Readlink(fd)
			if err != nil {
				continue
			}
			for _, in := range inodes {
				if link == in {
					return i
				}
			}
		}
	}
	t.Fatalf("no replica has the connection from %s (sockets %v)", addr, inodes)
	return -1
}
