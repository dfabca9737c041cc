package uibridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/core"
)

// manualClock is an injected clock for server_time and the snapshot
// reuse window.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestSnapshotEncodedOncePerRevision: many clients connecting at one
// revision share one snapshot encoding; a new revision, another owner, or
// the reuse window running out (server_time would go stale) each make a
// new one.
func TestSnapshotEncodedOncePerRevision(t *testing.T) {
	clock := &manualClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	e := newEnv(t, func(c *Config) {
		c.Now = clock.Now
		c.Authenticators = []Authenticator{headerAuth{}}
	})
	for i := range 3 {
		ws := testWorkspace(fmt.Sprint("alice-", i))
		ws.Owner = "alice"
		e.save(ws)
	}
	bobs := testWorkspace("bob-1")
	bobs.Owner = "bob"
	e.save(bobs)
	as := func(user string) *dialOptions {
		return &dialOptions{HTTPHeader: http.Header{"X-Test-User": {user}}}
	}
	encodings := func() int64 { return e.srv.hub.snapEncodings.Load() }
	snapshotOf := func(user string) Message {
		t.Helper()
		c, _, err := e.dial(context.Background(), "", as(user))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		m := readMsg(t, c)
		if m.Type != "snapshot" {
			t.Fatalf("first message %q", m.Type)
		}
		return m
	}

	// A storm of 20 clients at one revision, concurrently: one encoding.
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 20 {
		wg.Go(func() {
			c, _, err := e.dial(context.Background(), "", as("alice"))
			if err != nil {
				bad.Add(1)
				return
			}
			defer c.Close()
			if m, err := tryReadMsg(c, 10*time.Second); err != nil || len(m.Workspaces) != 3 {
				bad.Add(1)
			}
		})
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d of 20 clients did not get alice's 3 workspaces", bad.Load())
	}
	if n := encodings(); n != 1 {
		t.Fatalf("20 clients at one revision: %d snapshot encodings, want 1", n)
	}

	// Another owner at the same revision gets their own.
	if m := snapshotOf("bob"); len(m.Workspaces) != 1 || m.Workspaces[0].ID != bobs.ID {
		t.Fatalf("bob's snapshot %+v", m.Workspaces)
	}
	if n := encodings(); n != 2 {
		t.Fatalf("after bob: %d encodings, want 2", n)
	}

	// A change moves the revision: the next client gets a fresh one with it.
	ws := testWorkspace("alice-new")
	ws.Owner = "alice"
	ws = e.save(ws)
	if m := snapshotOf("alice"); m.Rev != ws.Rev || len(m.Workspaces) != 4 {
		t.Fatalf("after a change: rev %d with %d workspaces, want rev %d with 4", m.Rev, len(m.Workspaces), ws.Rev)
	}
	if n := encodings(); n != 3 {
		t.Fatalf("after a change: %d encodings, want 3", n)
	}
	first := snapshotOf("alice")
	if n := encodings(); n != 3 {
		t.Fatalf("same revision again: %d encodings, want 3", n)
	}

	// Past the reuse window a snapshot is encoded again, so its
	// server_time (paused age is computed from it) is never stale.
	clock.Add(snapshotReuse)
	later := snapshotOf("alice")
	if n := encodings(); n != 4 {
		t.Fatalf("after the reuse window: %d encodings, want 4", n)
	}
	if !later.ServerTime.Equal(first.ServerTime.Add(snapshotReuse)) || later.Rev != first.Rev {
		t.Fatalf("server_time %v then %v (rev %d, %d), want %v apart at one rev", first.ServerTime, later.ServerTime, first.Rev, later.Rev, snapshotReuse)
	}
}

// TestStreamCompression: a client that offers permessage-deflate gets it,
// and the snapshot and later changes cross the wire compressed; one that
// does not gets the same messages uncompressed.
func TestStreamCompression(t *testing.T) {
	e := newEnv(t, nil)
	for i := range 200 {
		ws := testWorkspace(fmt.Sprintf("project-%03d", i))
		ws.BoxURL = "http://127.0.0.1:" + fmt.Sprint(30000+i)
		e.save(ws)
	}
	query := ""
	read := func(compress bool) (snapLen int, wire int64, ext string, upsert Message) {
		t.Helper()
		cd := &countingDialer{}
		c, resp, err := e.dial(context.Background(), query, &dialOptions{Compression: compress, HTTPClient: cd.client()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, data, err := c.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		var snap tableSnapshot
		if err := json.Unmarshal(data, &snap); err != nil || snap.Type != "snapshot" {
			t.Fatalf("snapshot: %v, type %q", err, snap.Type)
		}
		var got int
		if query == "" {
			var objects Message
			json.Unmarshal(data, &objects)
			got = len(objects.Workspaces)
		} else {
			got = len(rowObjects(t, snap.Fields, snap.Rows))
		}
		if got != len(e.svc.Workspaces("")) {
			t.Fatalf("snapshot (%q): %d workspaces, want %d", query, got, len(e.svc.Workspaces("")))
		}
		wire = cd.read.Load()
		ws := e.save(testWorkspace(strings.Repeat("compressible ", 20)))
		if upsert = readMsg(t, c); upsert.Type != "upsert" || upsert.Workspace == nil || upsert.Workspace.ID != ws.ID {
			t.Fatalf("after a change: %+v", upsert)
		}
		return len(data), wire, resp.Header.Get("Sec-WebSocket-Extensions"), upsert
	}

	n, wire, ext, _ := read(true)
	if !strings.Contains(ext, "permessage-deflate") {
		t.Fatalf("compression offered, extensions %q", ext)
	}
	if wire*3 > int64(n) {
		t.Fatalf("compressed snapshot of %d bytes took %d bytes on the wire, want under a third", n, wire)
	}
	n, wire, ext, _ = read(false)
	if ext != "" {
		t.Fatalf("no compression offered, extensions %q", ext)
	}
	if wire < int64(n) {
		t.Fatalf("uncompressed snapshot of %d bytes took only %d bytes on the wire", n, wire)
	}
	// The table form, compressed (as the page gets it), and a delta after.
	query = "?snapshot=table"
	n, wire, _, up := read(true)
	if wire*3 > int64(n) || up.Workspace == nil {
		t.Fatalf("compressed table snapshot of %d bytes took %d bytes on the wire", n, wire)
	}
}

// TestWritePoolIdle: stream writes go out as prepared messages, straight
// to the socket, so after traffic no client holds a pooled write buffer.
func TestWritePoolIdle(t *testing.T) {
	e := newEnv(t, nil)
	e.save(testWorkspace("one"))
	var conns []*websocket.Conn
	for range 5 {
		c := e.mustDial("")
		readMsg(t, c)
		conns = append(conns, c)
	}
	ws := e.save(testWorkspace("two"))
	for _, c := range conns {
		if m := readMsg(t, c); m.Rev != ws.Rev {
			t.Fatalf("upsert rev %d, want %d", m.Rev, ws.Rev)
		}
	}
	if n := writeBuffers.gets.Load(); n != 0 {
		t.Fatalf("stream writes borrowed %d write buffers; prepared messages need none", n)
	}
	if n := writeBuffers.out.Load(); n != 0 {
		t.Fatalf("%d write buffers held by idle clients", n)
	}
}

// TestSnapshotSize10k builds 10,000 realistic Docker workspaces (full
// 64-hex container ids, half paused with a size and no URL, as Docker
// reports a stopped container) and checks the snapshot's size, plain and
// as a compressed WebSocket frame.
func TestSnapshotSize10k(t *testing.T) {
	base := time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC)
	items := make([]*entry, 0, 10_000)
	for i := range 10_000 {
		ws := benchWorkspace(i, base)
		if ws.State == core.StatePaused {
			ws.BoxURL = ""
		}
		ws.UpdatedAt = base.Add(time.Duration(i) * 7 * time.Second)
		ws.Rev = int64(i + 1)
		items = append(items, newEntry(ws))
	}
	data := encodeSnapshot(10_000, base, items)
	var m Message
	if err := json.Unmarshal(data, &m); err != nil || len(m.Workspaces) != 10_000 {
		t.Fatalf("snapshot does not decode: %v (%d workspaces)", err, len(m.Workspaces))
	}
	if w := m.Workspaces[1]; w.PausedAt == nil || w.SizeBytes == nil || w.BoxID == "" || w.Lifecycle.IdlePauseAfterSeconds != 1800 {
		t.Fatalf("a paused workspace lost data on the way: %+v", w)
	}
	// Every field is present for a workspace that has it (v1 contract),
	// so 64-hex container ids and five timestamps set the floor: about
	// 4.6 MB, against 6.1 MB when null and empty fields were sent.
	const plainLimit = 4_700_000
	if len(data) > plainLimit {
		t.Errorf("snapshot of 10k workspaces is %d bytes, limit %d", len(data), plainLimit)
	}
	cd := &countingDialer{}
	wire := compressedSize(t, data, cd)
	if wire > 3_500_000 {
		t.Errorf("compressed snapshot of 10k workspaces is %d bytes on the wire, limit 3.5 MB", wire)
	}
	t.Logf("10k snapshot: %d bytes plain, %d bytes compressed on the wire", len(data), wire)

	// The table form (?snapshot=table) of the same workspaces is within
	// issue 9's 3.5 MB uncompressed.
	table := encodeTableSnapshot(10_000, base, items)
	var tm tableSnapshot
	if err := json.Unmarshal(table, &tm); err != nil || len(tm.Rows) != 10_000 {
		t.Fatalf("table snapshot does not decode: %v (%d rows)", err, len(tm.Rows))
	}
	if len(table) > 3_500_000 {
		t.Errorf("table snapshot of 10k workspaces is %d bytes, limit 3.5 MB", len(table))
	}
	t.Logf("10k snapshot in table form: %d bytes plain", len(table))
}

// compressedSize is how many bytes data takes on the wire as one stream
// message to a client that negotiated compression: a real server writes
// it as a prepared message to a real client over loopback.
func compressedSize(t *testing.T, data []byte, cd *countingDialer) int64 {
	t.Helper()
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, data)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		c.WritePreparedMessage(pm)
		c.NextReader() // until the client goes
	}))
	defer srv.Close()
	c, resp, err := wsDial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), &dialOptions{Compression: true, HTTPClient: cd.client(), Subprotocols: []string{Subprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !strings.Contains(resp.Header.Get("Sec-WebSocket-Extensions"), "permessage-deflate") {
		t.Fatal("compression was not negotiated")
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, got, err := c.ReadMessage()
	if err != nil || len(got) != len(data) {
		t.Fatalf("read back %d of %d bytes: %v", len(got), len(data), err)
	}
	return cd.read.Load()
}

// TestMalformedHandshake: a handshake the WebSocket library refuses gets
// the API's JSON error, naming what is wrong.
func TestMalformedHandshake(t *testing.T) {
	e := newEnv(t, nil)
	resp, body := e.do("GET", "/v1/ws", "", "Connection", "Upgrade", "Upgrade", "websocket",
		"Sec-WebSocket-Version", "13", "Sec-WebSocket-Protocol", Subprotocol)
	d := e.expectError(resp, body, http.StatusBadRequest, codeWebSocketHandshake)
	if !strings.Contains(d.Message, "Sec-WebSocket-Key") {
		t.Fatalf("message %q does not name the missing header", d.Message)
	}
}
