package uibridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/core"
)

// sameWire compares what the stream sent with the wire form of ws.
func sameWire(t *testing.T, got Workspace, ws core.Workspace) {
	t.Helper()
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(toWireWorkspace(ws))
	if string(a) != string(b) {
		t.Fatalf("workspace on the stream\n got %s\nwant %s", a, b)
	}
}

func TestStreamSnapshot(t *testing.T) {
	e := newEnv(t, nil)
	var saved []core.Workspace
	for i := range 3 {
		ws := testWorkspace(fmt.Sprint("w", i))
		ws.CreatedAt = time.Now().UTC().Add(time.Duration(i) * time.Second)
		if i == 1 {
			ws.State = core.StatePaused
			ws.PausedAt = time.Now().UTC()
			ws.Size = &core.Size{Bytes: 4096, Source: core.SizeDockerEngineUsed, At: time.Now()}
		}
		saved = append(saved, e.save(ws))
	}
	gone := e.save(testWorkspace("gone"))
	gone.Removed = true
	e.save(gone)

	c := e.mustDial("")
	_, raw, err := c.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var m Message
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.Type != "snapshot" || m.Rev != e.svc.Feed().Rev() || time.Since(m.ServerTime) > time.Minute {
		t.Fatalf("snapshot header: type %q rev %d (feed %d) server_time %v", m.Type, m.Rev, e.svc.Feed().Rev(), m.ServerTime)
	}
	if len(m.Workspaces) != 3 {
		t.Fatalf("snapshot has %d workspaces, want 3 (the removed one left out)", len(m.Workspaces))
	}
	for i, got := range m.Workspaces {
		sameWire(t, got, saved[2-i]) // newest first
	}
	var rawMsg struct {
		Workspaces []json.RawMessage `json:"workspaces"`
	}
	json.Unmarshal(raw, &rawMsg)
	checkWireKeys(t, rawMsg.Workspaces[0])
}

func TestStreamUpsertAndRemove(t *testing.T) {
	e := newEnv(t, nil)
	c := e.mustDial("")
	snap := readMsg(t, c)
	if snap.Type != "snapshot" || len(snap.Workspaces) != 0 {
		t.Fatalf("first message %+v", snap)
	}
	last := snap.Rev

	ws := e.save(testWorkspace("live"))
	m := readMsg(t, c)
	if m.Type != "upsert" || m.Rev != ws.Rev || m.Workspace == nil || m.Rev <= last {
		t.Fatalf("after create: %+v, want upsert rev %d", m, ws.Rev)
	}
	sameWire(t, *m.Workspace, ws)
	last = m.Rev

	ws.State = core.StatePaused
	ws.PausedAt = time.Now()
	ws = e.save(ws)
	m = readMsg(t, c)
	if m.Type != "upsert" || m.Rev != ws.Rev || m.Workspace.State != "paused" || m.Workspace.PausedAt == nil || m.Rev <= last {
		t.Fatalf("after pause: %+v", m)
	}
	last = m.Rev

	ws.Removed = true
	ws = e.save(ws)
	m = readMsg(t, c)
	if m.Type != "remove" || m.ID != ws.ID || m.Rev != ws.Rev || m.Workspace != nil || m.Rev <= last {
		t.Fatalf("after remove: %+v", m)
	}
}

func TestStreamSince(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	unchanged := e.save(testWorkspace("unchanged"))
	c := e.mustDial("")
	r := readMsg(t, c).Rev
	c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	c.Close()

	// Missed while disconnected.
	a := e.save(testWorkspace("a"))
	b := e.save(testWorkspace("b"))
	a.State = core.StatePaused
	a = e.save(a)
	b.Removed = true
	b = e.save(b)

	c = e.mustDial("?since=" + strconv.FormatInt(r, 10))
	m := readMsg(t, c)
	if m.Type != "upsert" || m.Rev != a.Rev || m.Workspace.ID != a.ID || m.Workspace.State != "paused" {
		t.Fatalf("first catch-up message %+v, want upsert of %s at rev %d", m, a.ID, a.Rev)
	}
	m = readMsg(t, c)
	if m.Type != "remove" || m.Rev != b.Rev || m.ID != b.ID {
		t.Fatalf("second catch-up message %+v, want remove of %s at rev %d", m, b.ID, b.Rev)
	}
	// Then live: the very next message is the next change, nothing repeated.
	d := e.save(testWorkspace("d"))
	if m = readMsg(t, c); m.Type != "upsert" || m.Rev != d.Rev || m.Workspace.ID != d.ID {
		t.Fatalf("first live message after catch-up %+v, want upsert of %s", m, d.ID)
	}

	// Up to date: nothing to catch up, the live stream continues.
	cur := e.svc.Feed().Rev()
	c2 := e.mustDial("?since=" + strconv.FormatInt(cur, 10))
	f := e.save(testWorkspace("f"))
	if m = readMsg(t, c2); m.Type != "upsert" || m.Rev != f.Rev {
		t.Fatalf("up-to-date client got %+v, want the live upsert at rev %d", m, f.Rev)
	}

	// From the future (another database): a snapshot.
	c3 := e.mustDial("?since=" + strconv.FormatInt(e.svc.Feed().Rev()+1000, 10))
	if m = readMsg(t, c3); m.Type != "snapshot" || m.Rev != e.svc.Feed().Rev() {
		t.Fatalf("future since: %+v, want a snapshot at %d", m, e.svc.Feed().Rev())
	}

	// Too old: b's tombstone was pruned, so a removal after r can no
	// longer be replayed.
	if err := e.st.PruneTombstones(ctx, time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	c4 := e.mustDial("?since=" + strconv.FormatInt(r, 10))
	m = readMsg(t, c4)
	if m.Type != "snapshot" || m.Rev != e.svc.Feed().Rev() {
		t.Fatalf("too-old since: %+v, want a snapshot", m)
	}
	ids := map[string]bool{}
	for _, w := range m.Workspaces {
		ids[w.ID] = true
	}
	if len(ids) != 4 || !ids[unchanged.ID] || !ids[a.ID] || !ids[d.ID] || !ids[f.ID] || ids[b.ID] {
		t.Fatalf("snapshot after a too-old since holds %v", ids)
	}

	// Bad since values are refused before upgrading.
	for _, v := range []string{"abc", "-1", "1.5", "99999999999999999999", ""} {
		_, resp, err := e.dial(ctx, "?since="+v, nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("since=%s: err %v, want 400", v, err)
		}
	}
}

func TestStreamFiltersByOwner(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Authenticators = []Authenticator{headerAuth{}} })
	as := func(user string) *dialOptions {
		return &dialOptions{HTTPHeader: http.Header{"X-Test-User": {user}}}
	}
	mine := testWorkspace("alice-old")
	mine.Owner = "alice"
	mine = e.save(mine)
	theirs := testWorkspace("bob-old")
	theirs.Owner = "bob"
	e.save(theirs)

	alice, _, err := e.dial(context.Background(), "", as("alice"))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	bob, _, err := e.dial(context.Background(), "", as("bob"))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	if m := readMsg(t, alice); len(m.Workspaces) != 1 || m.Workspaces[0].ID != mine.ID {
		t.Fatalf("alice's snapshot %+v", m.Workspaces)
	}
	if m := readMsg(t, bob); len(m.Workspaces) != 1 || m.Workspaces[0].ID != theirs.ID {
		t.Fatalf("bob's snapshot %+v", m.Workspaces)
	}
	// The desktop identity (token) owns neither.
	desk := e.mustDial("")
	if m := readMsg(t, desk); len(m.Workspaces) != 0 {
		t.Fatalf("desktop snapshot %+v", m.Workspaces)
	}

	b1 := testWorkspace("bob-new")
	b1.Owner = "bob"
	b1 = e.save(b1)
	a1 := testWorkspace("alice-new")
	a1.Owner = "alice"
	a1 = e.save(a1)
	if m := readMsg(t, alice); m.Workspace == nil || m.Workspace.ID != a1.ID {
		t.Fatalf("alice got %+v, want her own upsert %s", m, a1.ID)
	}
	if m := readMsg(t, bob); m.Workspace == nil || m.Workspace.ID != b1.ID {
		t.Fatalf("bob got %+v, want his own upsert %s", m, b1.ID)
	}
	// Catch-up is filtered too.
	alice.Close()
	b1.State = core.StatePaused
	e.save(b1)
	a1.State = core.StatePaused
	a1 = e.save(a1)
	alice, _, err = e.dial(context.Background(), "?since="+strconv.FormatInt(a1.Rev-2, 10), as("alice"))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	if m := readMsg(t, alice); m.Type != "upsert" || m.Workspace.ID != a1.ID || m.Rev != a1.Rev {
		t.Fatalf("alice's catch-up %+v, want only her %s", m, a1.ID)
	}

	resp, body := e.do("GET", "/v1/workspaces", "", "Authorization", "", "X-Test-User", "alice")
	if resp.StatusCode != 200 || strings.Contains(string(body), theirs.ID) || !strings.Contains(string(body), mine.ID) {
		t.Fatalf("alice's list: %d %s", resp.StatusCode, body)
	}
	resp, body = e.do("GET", "/v1/workspaces/"+theirs.ID, "", "Authorization", "", "X-Test-User", "alice")
	e.expectError(resp, body, http.StatusNotFound, "not_found")
}

func TestStreamPingKeepsIdleClient(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.PingInterval = 20 * time.Millisecond; c.PongTimeout = 5 * time.Second })
	c := e.mustDial("")
	msgs := make(chan Message, 16)
	go func() {
		for {
			m, err := tryReadMsg(c, time.Minute)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- m
		}
	}()
	<-msgs // snapshot
	// An idle client that answers pings stays connected through many
	// ping rounds.
	eventually(t, "five pongs", func() bool { return e.srv.pongs.Load() >= 5 })
	ws := e.save(testWorkspace("after-idle"))
	m, ok := <-msgs
	if !ok || m.Type != "upsert" || m.Rev != ws.Rev {
		t.Fatalf("after idling: %+v (open %v), want the upsert", m, ok)
	}
	if n := e.srv.hub.clientCount(); n != 1 {
		t.Fatalf("%d clients attached, want 1", n)
	}
}

func TestStreamClosesClientWithoutPong(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.PingInterval = 20 * time.Millisecond; c.PongTimeout = 100 * time.Millisecond })
	c := e.mustDial("")
	// The client never reads, so it never answers a ping.
	eventually(t, "the server to drop the silent client", func() bool { return e.srv.pongMissed.Load() == 1 })
	if m := readMsg(t, c); m.Type != "snapshot" {
		t.Fatalf("first message %q", m.Type)
	}
	_, err := tryReadMsg(c, 10*time.Second)
	if code := closeStatus(err); code != ClosePongTimeout {
		t.Fatalf("close: %v (code %d), want %d", err, code, ClosePongTimeout)
	}
}

// smallReadBuffer makes the client's socket buffer tiny so that a client
// that stops reading blocks the server's writes quickly.
func smallReadBuffer() *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			// Not below the loopback MSS (64 KiB), or the sender
			// waits on zero-window probes with backoff.
			c.(*net.TCPConn).SetReadBuffer(256 << 10)
		}
		return c, err
	}}}
}

func TestStreamSlowConsumer(t *testing.T) {
	const limit = 4
	e := newEnv(t, func(c *Config) { c.ClientQueue = limit; c.WriteTimeout = 5 * time.Minute })
	c, _, err := e.dial(context.Background(), "", &dialOptions{HTTPClient: smallReadBuffer()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	last := readMsg(t, c).Rev // snapshot; from here on the client reads nothing

	big := strings.Repeat("x", 64<<10)
	saves := 0
	for e.srv.hub.overflows.Load() == 0 {
		if saves == 2000 {
			t.Fatal("the server never gave up on a client that does not read")
		}
		ws := testWorkspace(fmt.Sprint("flood", saves))
		ws.Error = big
		e.save(ws)
		saves++
	}
	// The hub let go of the client at once, even though its writer is
	// still stuck in a write to the full socket.
	if n := e.srv.hub.clientCount(); n != 0 {
		t.Fatalf("%d clients still attached after the overflow", n)
	}
	if got := e.srv.maxQueue.Load(); got > limit {
		t.Fatalf("a client queue reached %d messages, limit %d", got, limit)
	}

	// The client catches up on what was written, then learns why it was
	// closed and where to resume.
	received := 0
	for {
		m, err := tryReadMsg(c, 30*time.Second)
		if err != nil {
			if code := closeStatus(err); code != CloseSlowConsumer {
				t.Fatalf("stream ended with %v, want close %d", err, CloseSlowConsumer)
			}
			ce, _ := asCloseError(err)
			if want := "slow consumer: reconnect with ?since=" + strconv.FormatInt(last, 10); ce.Text != want {
				t.Fatalf("close reason %q, want %q", ce.Text, want)
			}
			break
		}
		if m.Type != "upsert" || m.Rev <= last {
			t.Fatalf("message %s rev %d after rev %d", m.Type, m.Rev, last)
		}
		last = m.Rev
		received++
	}
	if received >= saves {
		t.Fatalf("received all %d changes; the client was not actually behind", saves)
	}

	// Resuming from the reason's revision delivers exactly the rest.
	c2 := e.mustDial("?since=" + strconv.FormatInt(last, 10))
	for range saves - received {
		m := readMsg(t, c2)
		if m.Type != "upsert" || m.Rev != last+1 {
			t.Fatalf("catch-up message %s rev %d, want upsert rev %d", m.Type, m.Rev, last+1)
		}
		last = m.Rev
	}
	if last != e.svc.Feed().Rev() {
		t.Fatalf("caught up to %d, feed at %d", last, e.svc.Feed().Rev())
	}
}

func TestStreamClientMessagesDiscarded(t *testing.T) {
	e := newEnv(t, nil)
	c := e.mustDial("")
	readMsg(t, c)
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"hello"}`)); err != nil {
		t.Fatal(err)
	}
	ws := e.save(testWorkspace("still-here"))
	if m := readMsg(t, c); m.Rev != ws.Rev {
		t.Fatalf("after a client message: %+v", m)
	}
	// The server may cut the connection before the client finishes
	// writing; what matters is how the stream ends.
	c.WriteMessage(websocket.TextMessage, make([]byte, clientReadLimit+1))
	_, err := tryReadMsg(c, 10*time.Second)
	if code := closeStatus(err); code != websocket.CloseMessageTooBig {
		t.Fatalf("after an oversized client message: %v, want close 1009", err)
	}
}

func TestStreamShutdown(t *testing.T) {
	e := newEnv(t, nil)
	c := e.mustDial("")
	readMsg(t, c)
	done := make(chan struct{})
	go func() { e.srv.Close(); close(done) }()
	_, err := tryReadMsg(c, 10*time.Second)
	if code := closeStatus(err); code != websocket.CloseGoingAway {
		t.Fatalf("on shutdown: %v, want close 1001", err)
	}
	<-done
	// New connections are refused once closed.
	_, resp, err := e.dial(context.Background(), "", nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("dial after Close: %v, want 503", err)
	}
}

func TestStreamSurvivesHubFallingBehind(t *testing.T) {
	// A one-slot subscription makes the core feed drop the hub whenever it
	// lags; it must pick up from the store without losing or repeating a
	// change.
	e := newEnv(t, func(c *Config) { c.FeedBuffer = 1 })
	c := e.mustDial("")
	last := readMsg(t, c).Rev
	const n = 300
	ids := map[string]bool{}
	// Two of the three bursts arrive while the hub is stalled, so it is
	// certainly dropped (at least twice); the middle one races it.
	for burst := range 3 {
		var resume func()
		if burst != 1 {
			resume = stallHub(e)
		}
		for i := range n / 3 {
			ids[e.save(testWorkspace(fmt.Sprint("burst", burst, "-", i))).ID] = true
		}
		if resume != nil {
			resume()
		}
	}
	for len(ids) > 0 {
		m := readMsg(t, c)
		if m.Type != "upsert" || m.Rev <= last || !ids[m.Workspace.ID] {
			t.Fatalf("message %s rev %d (after %d) for %v", m.Type, m.Rev, last, m.Workspace)
		}
		delete(ids, m.Workspace.ID)
		last = m.Rev
	}
	if last != e.svc.Feed().Rev() {
		t.Fatalf("stream ended at rev %d, feed at %d", last, e.svc.Feed().Rev())
	}
	if got := strings.Count(e.logs.String(), "resubscribing"); got < 2 {
		t.Fatalf("the hub resubscribed %d times, want at least 2: the test did not exercise falling behind", got)
	}
}

// stallHub holds the hub's lock, so it cannot take changes from the feed,
// until the returned function is called.
func stallHub(e *testEnv) (resume func()) {
	e.srv.hub.mu.Lock()
	return e.srv.hub.mu.Unlock
}

func TestStreamCatchesUpAfterTheHubWasDropped(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.FeedBuffer = 1 })
	c := e.mustDial("")
	last := readMsg(t, c).Rev
	resume := stallHub(e)
	var saved []core.Workspace
	for i := range 5 {
		saved = append(saved, e.save(testWorkspace(fmt.Sprint("while-stalled", i))))
	}
	resume()
	for _, ws := range saved {
		m := readMsg(t, c)
		if m.Type != "upsert" || m.Rev != ws.Rev || m.Rev <= last {
			t.Fatalf("after catching up: %s rev %d, want upsert rev %d", m.Type, m.Rev, ws.Rev)
		}
		last = m.Rev
	}
	if !strings.Contains(e.logs.String(), "resubscribing") {
		t.Fatal("the hub was never dropped; the test did not exercise catching up")
	}
}

func TestStreamResetWhenTheStoreCannotReplay(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.FeedBuffer = 1 })
	ctx := context.Background()
	keep := e.save(testWorkspace("kept"))
	c := e.mustDial("")
	readMsg(t, c)
	resume := stallHub(e)
	// The hub holds one change and has one buffered: the third drops it.
	e.save(testWorkspace("filler-1"))
	e.save(testWorkspace("filler-2"))
	gone := e.save(testWorkspace("gone"))
	gone.Removed = true
	e.save(gone)
	e.save(testWorkspace("after"))
	// Forget every removal: the hub's revision is now older than anything
	// the store can replay.
	if err := e.st.PruneTombstones(ctx, time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	resume()
	// The change still in the hub's buffer may arrive first; then the
	// stream must be reset, not continued with a gap.
	var err error
	for err == nil {
		_, err = tryReadMsg(c, 10*time.Second)
	}
	if code := closeStatus(err); code != CloseResync {
		t.Fatalf("client of a hub that lost its place: %v, want close %d", err, CloseResync)
	}
	// A new connection gets a snapshot of what really exists.
	c2 := e.mustDial("")
	m := readMsg(t, c2)
	names := map[string]bool{}
	for _, ws := range m.Workspaces {
		names[ws.Name] = true
	}
	if m.Type != "snapshot" || len(m.Workspaces) != 4 || !names[keep.Name] || !names["after"] || names["gone"] {
		t.Fatalf("snapshot after the reset: %+v", m)
	}
}
