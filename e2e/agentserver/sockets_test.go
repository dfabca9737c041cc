package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// wsURL is the socket URL for path (with its query) on the env's server.
func (e *env) wsURL(path string) string {
	return "ws" + strings.TrimPrefix(e.srv.URL, "http") + path
}

// dial opens a socket; it fails the test when the handshake fails.
func (e *env) dial(path string, hdr http.Header) *websocket.Conn {
	e.t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial(e.wsURL(path), hdr)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		e.t.Fatalf("dial %s: %v (status %d)", path, err, status)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// refused dials path and returns the handshake's HTTP status, failing the
// test when the socket is accepted.
func (e *env) refused(path string, hdr http.Header) int {
	e.t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial(e.wsURL(path), hdr)
	if err == nil {
		c.Close()
		e.t.Fatalf("dial %s: accepted, want refused", path)
	}
	if resp == nil {
		e.t.Fatalf("dial %s: %v without a response", path, err)
	}
	return resp.StatusCode
}

// next reads one JSON text frame.
func next(t *testing.T, c *websocket.Conn) map[string]any {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	mt, data, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if mt != websocket.TextMessage {
		t.Fatalf("frame type %d, want text", mt)
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("frame %s: %v", data, err)
	}
	return v
}

// closedWith reads until the server closes and returns the close code and
// reason (1006 when the connection dropped without a close frame).
func closedWith(t *testing.T, c *websocket.Conn) (int, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, _, err := c.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code, ce.Text
		}
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("socket still open")
		}
		return -1, err.Error()
	}
}

// silent checks that no frame arrives for a short while.
func silent(t *testing.T, c *websocket.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, data, err := c.ReadMessage(); err == nil {
		t.Fatalf("unexpected frame %s", data)
	}
}

func sendJSON(t *testing.T, c *websocket.Conn, v any) {
	t.Helper()
	if err := c.WriteJSON(v); err != nil {
		t.Fatal(err)
	}
}

func sendText(t *testing.T, c *websocket.Conn, s string) {
	t.Helper()
	if err := c.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		t.Fatal(err)
	}
}

func (e *env) message(id, text string) {
	e.t.Helper()
	body := map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": text}}}
	if code, raw := e.do("POST", "/api/conversations/"+id+"/events", body, nil); code != 200 {
		e.t.Fatalf("send message: %d %s", code, raw)
	}
}

// wantState checks the snapshot every subscriber gets first.
func wantState(t *testing.T, c *websocket.Conn, id string) {
	t.Helper()
	ev := next(t, c)
	if ev["kind"] != "ConversationStateUpdateEvent" || ev["key"] != "full_state" || ev["source"] != "environment" {
		t.Fatalf("first frame %v, want the full_state snapshot", ev)
	}
	if v, _ := ev["value"].(map[string]any); v["id"] != id || v["execution_status"] != "idle" {
		t.Fatalf("snapshot value %v", ev["value"])
	}
}

func messageText(t *testing.T, ev map[string]any) string {
	t.Helper()
	if ev["kind"] != "MessageEvent" {
		t.Fatalf("event %v, want a MessageEvent", ev)
	}
	msg, _ := ev["llm_message"].(map[string]any)
	parts, _ := msg["content"].([]any)
	if len(parts) != 1 {
		t.Fatalf("message content %v", msg["content"])
	}
	p, _ := parts[0].(map[string]any)
	return p["text"].(string)
}

func TestEventsSocketAuth(t *testing.T) {
	key := url.QueryEscape(testKey)
	hdr := func(k string) http.Header { return http.Header{"X-Session-API-Key": {k}} }
	t.Run("no keys configured", func(t *testing.T) {
		e := newEnv(t, Config{})
		c := e.create(map[string]any{})
		// A key, even a wrong one, is not looked at.
		ws := e.dial("/sockets/events/"+c.ID+"?session_api_key=wrong", nil)
		wantState(t, ws, c.ID)
		sendJSON(t, ws, map[string]any{"type": "auth", "session_api_key": "whatever"})
		silent(t, ws) // a redundant auth frame is ignored
	})
	e := newEnv(t, Config{Keys: []string{"other", testKey}})
	c := e.create(map[string]any{})
	path := "/sockets/events/" + c.ID
	t.Run("query", func(t *testing.T) {
		ws := e.dial(path+"?session_api_key="+key, nil)
		wantState(t, ws, c.ID)
		sendJSON(t, ws, map[string]any{"type": "auth", "session_api_key": testKey})
		silent(t, ws)
	})
	t.Run("header", func(t *testing.T) {
		wantState(t, e.dial(path, hdr(testKey)), c.ID)
	})
	t.Run("wrong legacy key", func(t *testing.T) {
		for _, p := range []string{path + "?session_api_key=nope", path + "?session_api_key="} {
			if code := e.refused(p, nil); code != http.StatusForbidden {
				t.Errorf("%s: status %d, want 403", p, code)
			}
		}
		if code := e.refused(path, hdr("nope")); code != http.StatusForbidden {
			t.Errorf("header: status %d, want 403", code)
		}
		// The query parameter is looked at first: a good header does not
		// save a wrong query key.
		if code := e.refused(path+"?session_api_key=nope", hdr(testKey)); code != http.StatusForbidden {
			t.Errorf("query over header: status %d, want 403", code)
		}
	})
	t.Run("first message", func(t *testing.T) {
		ws := e.dial(path, nil)
		sendJSON(t, ws, map[string]any{"type": "auth", "session_api_key": testKey})
		wantState(t, ws, c.ID)
		sendJSON(t, ws, map[string]any{"type": "auth", "session_api_key": testKey})
		silent(t, ws)
	})
	for name, frame := range map[string]string{
		"bad key":      `{"type":"auth","session_api_key":"nope"}`,
		"key not text": `{"type":"auth","session_api_key":1}`,
		"wrong type":   `{"type":"hello","session_api_key":"` + testKey + `"}`,
		"malformed":    `{"type":"auth",`,
		"not object":   `["auth"]`,
	} {
		t.Run(name, func(t *testing.T) {
			ws := e.dial(path, nil)
			sendText(t, ws, frame)
			if code, reason := closedWith(t, ws); code != 4001 || reason != "Authentication failed" {
				t.Errorf("closed %d %q, want 4001 Authentication failed", code, reason)
			}
		})
	}
	t.Run("binary frame", func(t *testing.T) {
		// Upstream's receive_text() raises on it and uvicorn drops the
		// connection without a close frame.
		ws := e.dial(path, nil)
		ws.WriteMessage(websocket.BinaryMessage, []byte(`{"type":"auth","session_api_key":"`+testKey+`"}`))
		if code, _ := closedWith(t, ws); code != websocket.CloseAbnormalClosure {
			t.Errorf("closed with %d, want a dropped connection (1006)", code)
		}
	})
}

func TestEventsSocketAuthTimeout(t *testing.T) {
	e := newEnv(t, Config{Keys: []string{testKey}, SocketAuthTimeout: 200 * time.Millisecond})
	c := e.create(map[string]any{})
	ws := e.dial("/sockets/events/"+c.ID, nil)
	t0 := time.Now()
	if code, reason := closedWith(t, ws); code != 4001 || reason != "Authentication failed" {
		t.Errorf("closed %d %q, want 4001 Authentication failed", code, reason)
	}
	if d := time.Since(t0); d < 150*time.Millisecond {
		t.Errorf("closed after %v, before the timeout", d)
	}
}

func TestEventsSocketRefusals(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.create(map[string]any{})
	ws := e.dial("/sockets/events/"+newUUID().dashed(), nil)
	if code, reason := closedWith(t, ws); code != 4004 || reason != "Conversation not found" {
		t.Errorf("unknown conversation: closed %d %q, want 4004 Conversation not found", code, reason)
	}
	// Parameters FastAPI validates refuse the handshake.
	for _, p := range []string{
		"/sockets/events/not-a-uuid",
		"/sockets/events/" + c.ID + "?resend_mode=some",
		"/sockets/events/" + c.ID + "?resend_mode=",
		"/sockets/events/" + c.ID + "?resend_mode=since&after_timestamp=yesterday",
		"/sockets/events/" + c.ID + "?resend_all=maybe",
		"/sockets/bash-events?resend_mode=since",
	} {
		if code := e.refused(p, nil); code != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", p, code)
		}
	}
	// Plain HTTP finds no route there.
	for _, m := range []string{"GET", "POST"} {
		if code, raw := e.do(m, "/sockets/events/"+c.ID, nil, nil); code != 404 || detailOf(raw) != "Not Found" {
			t.Errorf("%s: %d %s, want 404 Not Found", m, code, raw)
		}
	}
}

func TestEventsSocketResend(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.create(map[string]any{"initial_message": map[string]any{"role": "user",
		"content": []any{map[string]any{"type": "text", "text": "first"}}}})
	e.clock.Advance(10 * time.Second)
	e.message(c.ID, "second")
	e.clock.Advance(10 * time.Second)
	e.message(c.ID, "third")

	kinds := func(ws *websocket.Conn, n int) []map[string]any {
		wantState(t, ws, c.ID)
		var out []map[string]any
		for range n {
			out = append(out, next(t, ws))
		}
		silent(t, ws)
		return out
	}
	for _, q := range []string{"resend_mode=all", "resend_all=true", "resend_all=1&after_timestamp=2000-01-01"} {
		evs := kinds(e.dial("/sockets/events/"+c.ID+"?"+q, nil), 4)
		if evs[0]["kind"] != "SystemPromptEvent" || messageText(t, evs[1]) != "first" ||
			messageText(t, evs[2]) != "second" || messageText(t, evs[3]) != "third" {
			t.Errorf("%s: resent %v", q, evs)
		}
		for _, ev := range evs[1:] {
			if _, ok := ev["sender"]; ok {
				t.Errorf("%s: null fields are sent: %v", q, ev)
			}
		}
	}
	// No resend: the snapshot only.
	kinds(e.dial("/sockets/events/"+c.ID, nil), 0)
	kinds(e.dial("/sockets/events/"+c.ID+"?resend_mode=since", nil), 0) // since without a time

	second := e.clock.Now().Add(-10 * time.Second) // when "second" was sent
	for _, after := range []string{
		eventTime(second), // naive: server local time; the bound is inclusive
		second.UTC().Format("2006-01-02T15:04:05.000000Z"),
		second.Add(-time.Second).In(time.FixedZone("", -5*3600)).Format(time.RFC3339),
		strconv.FormatInt(second.Unix(), 10), // seconds since the epoch
	} {
		q := "resend_mode=since&after_timestamp=" + url.QueryEscape(after)
		evs := kinds(e.dial("/sockets/events/"+c.ID+"?"+q, nil), 2)
		if messageText(t, evs[0]) != "second" || messageText(t, evs[1]) != "third" {
			t.Errorf("%s: resent %v", q, evs)
		}
	}
	// resend_mode wins over the deprecated resend_all.
	q := "resend_mode=since&resend_all=true&after_timestamp=" + url.QueryEscape(eventTime(e.clock.Now()))
	if evs := kinds(e.dial("/sockets/events/"+c.ID+"?"+q, nil), 1); messageText(t, evs[0]) != "third" {
		t.Errorf("since with resend_all: %v", evs)
	}
}

func TestEventsSocketLive(t *testing.T) {
	e := newEnv(t, Config{Keys: []string{testKey}})
	c := e.create(map[string]any{})
	a := e.dial("/sockets/events/"+c.ID, nil)
	sendJSON(t, a, map[string]any{"type": "auth", "session_api_key": testKey})
	b := e.dial("/sockets/events/"+c.ID, http.Header{"X-Session-API-Key": {testKey}})
	wantState(t, a, c.ID)
	wantState(t, b, c.ID)

	// Connecting is not activity.
	e.clock.Advance(time.Minute)
	if idle := e.idle(); idle != 60 {
		t.Fatalf("idle_time %v after connecting, want 60", idle)
	}
	e.message(c.ID, "over http")
	for _, ws := range []*websocket.Conn{a, b} {
		if got := messageText(t, next(t, ws)); got != "over http" {
			t.Errorf("live event %q", got)
		}
	}
	// A message over the socket is a user message: both sockets see it,
	// it is stored, and it is activity.
	e.clock.Advance(time.Minute)
	sendJSON(t, a, map[string]any{"role": "user", "content": "over the socket"})
	for _, ws := range []*websocket.Conn{a, b} {
		ev := next(t, ws)
		if got := messageText(t, ev); got != "over the socket" || ev["source"] != "user" {
			t.Errorf("live event %v", ev)
		}
	}
	if idle := e.idle(); idle != 0 {
		t.Errorf("idle_time %v after a message over the socket, want 0", idle)
	}
	r := e.dial("/sockets/events/"+c.ID+"?resend_mode=all&session_api_key="+testKey, nil)
	wantState(t, r, c.ID)
	next(t, r) // the system prompt
	if messageText(t, next(t, r)) != "over http" || messageText(t, next(t, r)) != "over the socket" {
		t.Error("the socket's message was not stored after the HTTP one")
	}
}

func TestEventsSocketErrors(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.create(map[string]any{})
	ws := e.dial("/sockets/events/"+c.ID, nil)
	wantState(t, ws, c.ID)
	wantError := func(code, text string) {
		t.Helper()
		ev := next(t, ws)
		if ev["kind"] != "ServerErrorEvent" || ev["source"] != "environment" || ev["code"] != code || ev["detail"] != text {
			t.Errorf("got %v, want ServerErrorEvent %s %q", ev, code, text)
		}
	}
	sendText(t, ws, "hello")
	wantError("JSONDecodeError", "Expecting value: line 1 column 1 (char 0)")
	sendText(t, ws, `{"role": "user",}`)
	wantError("JSONDecodeError", "Illegal trailing comma before end of object: line 1 column 16 (char 15)")
	ws.WriteMessage(websocket.BinaryMessage, []byte(`{"role":"user"}`))
	wantError("KeyError", "'text'")
	sendText(t, ws, `{"content": "hi", "type": "auth", "session_api_key": 1}`)
	wantError("ValidationError", "1 validation error for Message\nrole\n"+
		"  Field required [type=missing, input_value={'content': 'hi', 'type':...', 'session_api_key': 1}, input_type=dict]\n"+
		"    For further information visit https://errors.pydantic.dev/2.12/v/missing")
	sendText(t, ws, `{"role": "robot", "content": 5}`)
	wantError("ValidationError", "2 validation errors for Message\nrole\n"+
		"  Input should be 'user', 'system', 'assistant' or 'tool' [type=literal_error, input_value='robot', input_type=str]\n"+
		"    For further information visit https://errors.pydantic.dev/2.12/v/literal_error\ncontent\n"+
		"  Input should be an instance of Sequence [type=is_instance_of, input_value=5, input_type=int]\n"+
		"    For further information visit https://errors.pydantic.dev/2.12/v/is_instance_of")
	sendText(t, ws, `7`)
	wantError("ValidationError", "1 validation error for Message\n"+
		"  Input should be a valid dictionary or instance of Message [type=model_type, input_value=7, input_type=int]\n"+
		"    For further information visit https://errors.pydantic.dev/2.12/v/model_type")
	sendJSON(t, ws, map[string]any{"role": "assistant", "content": []any{}})
	wantError("AssertionError", "Only user messages are allowed to be sent to the agent.")

	// A deleted conversation's socket stays open and hears nothing more.
	if code, raw := e.do("DELETE", "/api/conversations/"+c.ID, nil, nil); code != 200 {
		t.Fatalf("delete: %d %s", code, raw)
	}
	sendJSON(t, ws, map[string]any{"role": "user", "content": "anyone?"})
	wantError("ValueError", "inactive_service")
}

func TestEventsSocketSubscriberLimit(t *testing.T) {
	e := newEnv(t, Config{})
	for _, tc := range []struct {
		body map[string]any
		room int
	}{
		{map[string]any{}, 48},                  // untitled: the auto-title subscriber takes a place
		{map[string]any{"title": "titled"}, 49}, // only the clock keeper
		{map[string]any{"autotitle": false}, 49},
	} {
		c := e.create(tc.body)
		var open []*websocket.Conn
		for range tc.room {
			ws := e.dial("/sockets/events/"+c.ID, nil)
			wantState(t, ws, c.ID)
			open = append(open, ws)
		}
		ws := e.dial("/sockets/events/"+c.ID, nil)
		if code, reason := closedWith(t, ws); code != websocket.CloseTryAgainLater || reason != "Too many connections for this conversation" {
			t.Errorf("%v: socket %d closed %d %q, want 1013", tc.body, tc.room+1, code, reason)
		}
		// A place frees up once a socket goes.
		open[0].Close()
		deadline := time.Now().Add(5 * time.Second)
		for {
			ws, _, err := websocket.DefaultDialer.Dial(e.wsURL("/sockets/events/"+c.ID), nil)
			if err != nil {
				t.Fatal(err)
			}
			ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _, err = ws.ReadMessage()
			ws.Close()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%v: no place after a socket closed: %v", tc.body, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, ws := range open {
			ws.Close()
		}
	}
}

func TestBashEventsSocket(t *testing.T) {
	e := newEnv(t, Config{Keys: []string{testKey}})
	// A socket subscribes after its handshake, so a command run at once
	// may be published before it listens: resend_mode=all has the socket
	// get, exactly once and in order, whatever came before it listened.
	ws := e.dial("/sockets/bash-events?resend_mode=all&session_api_key="+testKey, nil)
	out := e.bash(map[string]any{"command": "echo hi"})
	cmd := next(t, ws)
	if cmd["kind"] != "BashCommand" || cmd["command"] != "echo hi" || cmd["timeout"] != 300.0 {
		t.Fatalf("first bash event %v", cmd)
	}
	res := next(t, ws)
	if res["kind"] != "BashOutput" || res["command_id"] != cmd["id"] || res["stdout"] != "hi\n" ||
		res["exit_code"] != 0.0 || res["id"] != out.ID {
		t.Fatalf("output event %v, execute answered %+v", res, out)
	}
	if _, ok := res["stderr"]; !ok {
		t.Error("bash events keep their null fields")
	}

	// A command over the socket runs in the background and is not
	// activity.
	e.clock.Advance(time.Minute)
	sendJSON(t, ws, map[string]any{"type": "auth", "session_api_key": testKey}) // ignored
	sendJSON(t, ws, map[string]any{"command": "echo there >&2; exit 3", "timeout": 5.0})
	cmd2, res2 := next(t, ws), next(t, ws)
	if cmd2["kind"] != "BashCommand" || res2["command_id"] != cmd2["id"] || res2["stderr"] != "there\n" || res2["exit_code"] != 3.0 {
		t.Errorf("socket command events %v %v", cmd2, res2)
	}
	if idle := e.idle(); idle != 60 {
		t.Errorf("idle_time %v after a socket command, want 60", idle)
	}
	sendJSON(t, ws, map[string]any{"command": 5, "timeout": "soon"})
	be := next(t, ws)
	want := "2 validation errors for ExecuteBashRequest\ncommand\n" +
		"  Input should be a valid string [type=string_type, input_value=5, input_type=int]\n" +
		"    For further information visit https://errors.pydantic.dev/2.12/v/string_type\ntimeout\n" +
		"  Input should be a valid integer, unable to parse string as an integer [type=int_parsing, input_value='soon', input_type=str]\n" +
		"    For further information visit https://errors.pydantic.dev/2.12/v/int_parsing"
	if be["kind"] != "BashError" || be["code"] != "ValidationError" || be["detail"] != want {
		t.Errorf("bad request: %v", be)
	}

	// The events are kept: a new socket can have them all again, in order.
	r := e.dial("/sockets/bash-events?resend_mode=all", http.Header{"X-Session-API-Key": {testKey}})
	var ids []any
	for range 4 {
		ids = append(ids, next(t, r)["id"])
	}
	silent(t, r)
	if ids[0] != cmd["id"] || ids[1] != res["id"] || ids[2] != cmd2["id"] || ids[3] != res2["id"] {
		t.Errorf("resent %v", ids)
	}
	silent(t, e.dial("/sockets/bash-events?session_api_key="+testKey, nil))
}

func TestBashEventsSocketLimit(t *testing.T) {
	e := newEnv(t, Config{})
	for range maxSubscribers {
		e.dial("/sockets/bash-events", nil)
	}
	// Sockets subscribe after their handshake: wait until all have.
	for i := 0; e.s.bash.subs.count() < maxSubscribers; i++ {
		if i == 500 {
			t.Fatalf("%d of %d sockets subscribed", e.s.bash.subs.count(), maxSubscribers)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ws := e.dial("/sockets/bash-events", nil)
	if code, reason := closedWith(t, ws); code != websocket.CloseTryAgainLater || reason != "Too many bash event connections" {
		t.Errorf("closed %d %q, want 1013", code, reason)
	}
}

func TestSocketsCloseOnShutdown(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.create(map[string]any{})
	ev := e.dial("/sockets/events/"+c.ID, nil)
	wantState(t, ev, c.ID)
	bash := e.dial("/sockets/bash-events", nil)
	for i := 0; e.s.bash.subs.count() < 1; i++ { // let the bash socket subscribe
		if i == 500 {
			t.Fatal("the bash socket never subscribed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.s.CloseSockets()
	for _, ws := range []*websocket.Conn{ev, bash} {
		if code, _ := closedWith(t, ws); code != websocket.CloseServiceRestart {
			t.Errorf("closed with %d, want 1012", code)
		}
	}
	ws := e.dial("/sockets/bash-events", nil)
	if code, _ := closedWith(t, ws); code != websocket.CloseServiceRestart {
		t.Errorf("socket after shutdown closed with %d, want 1012", code)
	}
}

func TestSocketsDoNotLeak(t *testing.T) {
	e := newEnv(t, Config{Keys: []string{testKey}, SocketAuthTimeout: time.Second})
	c := e.create(map[string]any{})
	e.idle() // the HTTP client's connection is up before counting
	before := runtime.NumGoroutine()
	for range 5 {
		a := e.dial("/sockets/events/"+c.ID+"?session_api_key="+testKey, nil)
		wantState(t, a, c.ID)
		b := e.dial("/sockets/bash-events?session_api_key="+testKey, nil)
		sendJSON(t, b, map[string]any{"command": "echo x"})
		next(t, b)
		next(t, b)
		waiting := e.dial("/sockets/events/"+c.ID, nil) // gone before its auth frame
		for _, ws := range []*websocket.Conn{a, b, waiting} {
			ws.Close()
		}
	}
	e.message(c.ID, "after they left") // publishes to no one
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.s.store.mu.Lock()
	n := len(e.s.store.convs[mustUUID(t, c.ID)].events.subs)
	e.s.store.mu.Unlock()
	if n != 0 {
		t.Errorf("%d subscribers left", n)
	}
}

func mustUUID(t *testing.T, s string) uuid {
	t.Helper()
	u, ok := parseUUID(s)
	if !ok {
		t.Fatalf("bad uuid %q", s)
	}
	return u
}
