package main

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
)

// frames is a subscriber that keeps what it is given.
type frames struct {
	mu  sync.Mutex
	got []map[string]any
}

func (f *frames) deliver(frame []byte) {
	var v map[string]any
	if err := json.Unmarshal(frame, &v); err != nil {
		panic(err)
	}
	f.mu.Lock()
	f.got = append(f.got, v)
	f.mu.Unlock()
}

func (f *frames) kinds() []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []any
	for _, v := range f.got {
		out = append(out, v["kind"])
	}
	return out
}

func TestPubSubLimit(t *testing.T) {
	p := newPubSub(2)
	subs := make([]*frames, maxSubscribers-2)
	for i := range subs {
		subs[i] = &frames{}
		if err := p.subscribe(subs[i]); err != nil {
			t.Fatalf("subscriber %d: %v", i, err)
		}
	}
	extra := &frames{}
	if err := p.subscribe(extra); !errors.Is(err, errTooManySubscribers) {
		t.Fatalf("one too many: %v", err)
	}
	p.unsubscribe(subs[0])
	if err := p.subscribe(extra); err != nil {
		t.Fatalf("after one left: %v", err)
	}
	p.publish([]byte(`{"kind":"A"}`))
	if len(subs[0].got) != 0 || len(subs[1].got) != 1 || len(extra.got) != 1 {
		t.Errorf("published to %d, %d, %d", len(subs[0].got), len(subs[1].got), len(extra.got))
	}
	p.clear()
	p.publish([]byte(`{"kind":"B"}`))
	if len(extra.got) != 1 {
		t.Error("published after clear")
	}
}

func TestEventFrameDropsNulls(t *testing.T) {
	b, err := eventFrame(map[string]any{"kind": "MessageEvent", "sender": nil, "a": "<&>",
		"llm_message": map[string]any{"role": "user", "content": json.RawMessage(`[{"type":"text","text":"x","n":1.0,"z":null}]`)}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":"<&>","kind":"MessageEvent","llm_message":{"content":[{"n":1.0,"text":"x","type":"text"}],"role":"user"}}`
	if string(b) != want {
		t.Errorf("frame %s, want %s", b, want)
	}
}

func TestBashEventsKept(t *testing.T) {
	work := t.TempDir()
	s, err := NewServer(Config{ConversationsPath: filepath.Join(work, "conversations")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	e := &env{t: t, srv: ts}
	live := &frames{}
	if err := s.bash.subscribe(live, false); err != nil {
		t.Fatal(err)
	}
	out := e.bash(map[string]any{"command": "echo hi"})
	if got := live.kinds(); len(got) != 2 || got[0] != "BashCommand" || got[1] != "BashOutput" {
		t.Fatalf("published %v", got)
	}
	// Upstream's layout: workspace/bash_events beside the conversations.
	entries, err := os.ReadDir(filepath.Join(work, "bash_events"))
	if err != nil || len(entries) != 2 {
		t.Fatalf("bash_events: %v %v", entries, err)
	}
	name := regexp.MustCompile(`^\d{20}_(BashCommand|BashOutput_[0-9a-f]{32})_[0-9a-f]{32}$`)
	for _, en := range entries {
		if !name.MatchString(en.Name()) {
			t.Errorf("file name %s", en.Name())
		}
	}
	again := &frames{}
	if err := s.bash.subscribe(again, true); err != nil {
		t.Fatal(err)
	}
	if len(again.got) != 2 || again.got[0]["kind"] != "BashCommand" || again.got[1]["id"] != out.ID {
		t.Errorf("resent %v", again.got)
	}
}

func TestConversationEventsPublished(t *testing.T) {
	s, err := NewServer(Config{ConversationsPath: filepath.Join(t.TempDir(), "conversations")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	e := &env{t: t, srv: ts}
	c := e.create(map[string]any{})
	id, _ := parseUUID(c.ID)
	s.store.mu.Lock()
	conv := s.store.convs[id]
	s.store.mu.Unlock()
	live := &frames{}
	if err := conv.events.subscribe(live); err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "hi"}}}
	if code, raw := e.do("POST", "/api/conversations/"+c.ID+"/events", body, nil); code != 200 {
		t.Fatalf("send: %d %s", code, raw)
	}
	s.store.mu.Lock()
	stored, err := s.store.events(conv)
	s.store.mu.Unlock()
	if err != nil || len(stored) != 2 || stored[0]["kind"] != "SystemPromptEvent" {
		t.Fatalf("stored %v %v", stored, err)
	}
	if len(live.got) != 1 || live.got[0]["id"] != stored[1]["id"] {
		t.Errorf("published %v, stored %v", live.got, stored[1])
	}
	if _, ok := live.got[0]["sender"]; ok {
		t.Error("null fields published")
	}
}
