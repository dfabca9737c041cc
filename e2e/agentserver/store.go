package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// uuid is a conversation or event id. The wire form is dashed; on disk a
// conversation directory is named by its 32-hex form, as upstream.
type uuid [16]byte

func newUUID() uuid {
	var u uuid
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u
}

// parseUUID accepts the dashed (8-4-4-4-12) and the 32-hex forms, in any
// case.
func parseUUID(s string) (uuid, bool) {
	var u uuid
	switch len(s) {
	case 32:
	case 36:
		if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return u, false
		}
		s = s[:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	default:
		return u, false
	}
	if _, err := hex.Decode(u[:], []byte(s)); err != nil {
		return u, false
	}
	return u, true
}

func (u uuid) hex() string { return hex.EncodeToString(u[:]) }

func (u uuid) dashed() string {
	h := u.hex()
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Execution statuses, as ConversationExecutionStatus upstream.
var executionStatuses = map[string]bool{
	"idle": true, "running": true, "paused": true, "waiting_for_confirmation": true,
	"finished": true, "error": true, "stuck": true, "deleting": true,
}

// conversation is one conversation's state, mirrored on disk.
type conversation struct {
	ID             uuid
	Title          *string
	Tags           map[string]string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	Status         string
	Agent          json.RawMessage
	Workspace      json.RawMessage
	Secrets        json.RawMessage
	MaxIterations  int
	StuckDetection bool
	// Autotitle is the start request's autotitle (default true).
	Autotitle bool
	nextEvent int

	// events carries the conversation's events to its sockets. Upstream
	// attaches its own subscribers when it loads a conversation: one that
	// keeps the clocks, and one that titles it from the first user
	// message when autotitle is on and it has no title yet. They take
	// places of the 50, so they are counted when the conversation is
	// loaded (the emulator titles nothing, so the second only counts).
	events *pubsub
	// closed is set when the conversation is deleted: sockets still
	// attached to it get "inactive_service" for what they send.
	closed bool
}

// internalSubscribers is how many of the 50 places upstream's own
// subscribers take when it loads c (conversation_service.py).
func (c *conversation) internalSubscribers() int {
	n := 1
	if c.Autotitle && c.Title == nil {
		n++
	}
	return n
}

// metaFile is <hex>/meta.json, the stored conversation; a directory without
// it is not a conversation (it is written last on create).
type metaFile struct {
	ID             string            `json:"id"`
	Title          *string           `json:"title"`
	Tags           map[string]string `json:"tags"`
	CreatedAt      string            `json:"created_at"`
	UpdatedAt      string            `json:"updated_at"`
	Agent          json.RawMessage   `json:"agent"`
	Workspace      json.RawMessage   `json:"workspace"`
	MaxIterations  int               `json:"max_iterations"`
	StuckDetection bool              `json:"stuck_detection"`
	Autotitle      *bool             `json:"autotitle"`
}

// stateFile is <hex>/base_state.json, the conversation state.
type stateFile struct {
	ID              string          `json:"id"`
	ExecutionStatus string          `json:"execution_status"`
	Agent           json.RawMessage `json:"agent"`
	Workspace       json.RawMessage `json:"workspace"`
	PersistenceDir  string          `json:"persistence_dir"`
	MaxIterations   int             `json:"max_iterations"`
	StuckDetection  bool            `json:"stuck_detection"`
	SecretRegistry  struct {
		SecretSources json.RawMessage `json:"secret_sources"`
	} `json:"secret_registry"`
}

// store keeps conversations in memory and on disk under dir, so they survive
// a restart of the process (a container stop and start).
type store struct {
	dir string
	log *slog.Logger

	mu    sync.Mutex
	convs map[uuid]*conversation
}

func openStore(dir string, log *slog.Logger) (*store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("conversations path: %w", err)
	}
	st := &store{dir: dir, log: log, convs: map[uuid]*conversation{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("conversations path: %w", err)
	}
	for _, e := range entries {
		id, ok := parseUUID(e.Name())
		if !e.IsDir() || !ok || len(e.Name()) != 32 {
			continue
		}
		c, err := st.load(id)
		if err != nil {
			log.Warn("skipping unreadable conversation", "id", e.Name(), "err", err)
			continue
		}
		st.convs[id] = c
	}
	log.Info("conversations loaded", "count", len(st.convs))
	return st, nil
}

func (st *store) convDir(id uuid) string { return filepath.Join(st.dir, id.hex()) }

func (st *store) load(id uuid) (*conversation, error) {
	dir := st.convDir(id)
	var m metaFile
	if err := readJSONFile(filepath.Join(dir, "meta.json"), &m); err != nil {
		return nil, err
	}
	var s stateFile
	if err := readJSONFile(filepath.Join(dir, "base_state.json"), &s); err != nil {
		return nil, err
	}
	created, err := time.Parse(time.RFC3339Nano, m.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("meta.json created_at: %w", err)
	}
	updated, err := time.Parse(time.RFC3339Nano, m.UpdatedAt)
	if err != nil {
		return nil, fmt.Errorf("meta.json updated_at: %w", err)
	}
	if !executionStatuses[s.ExecutionStatus] {
		return nil, fmt.Errorf("base_state.json: unknown execution_status %q", s.ExecutionStatus)
	}
	events, err := os.ReadDir(filepath.Join(dir, "events"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e.Name(), "event-") && strings.HasSuffix(e.Name(), ".json") {
			n++
		}
	}
	c := &conversation{
		ID: id, Title: m.Title, Tags: m.Tags, CreatedAt: created, UpdatedAt: updated,
		Status: s.ExecutionStatus, Agent: m.Agent, Workspace: m.Workspace,
		Secrets: s.SecretRegistry.SecretSources, MaxIterations: m.MaxIterations,
		StuckDetection: m.StuckDetection, Autotitle: m.Autotitle == nil || *m.Autotitle, nextEvent: n,
	}
	c.events = newPubSub(c.internalSubscribers())
	return c, nil
}

// save writes base_state.json, then meta.json, each atomically.
func (st *store) save(c *conversation) error {
	dir := st.convDir(c.ID)
	if err := os.MkdirAll(filepath.Join(dir, "events"), 0o755); err != nil {
		return err
	}
	s := stateFile{
		ID: c.ID.dashed(), ExecutionStatus: c.Status, Agent: c.Agent, Workspace: c.Workspace,
		PersistenceDir: dir, MaxIterations: c.MaxIterations, StuckDetection: c.StuckDetection,
	}
	s.SecretRegistry.SecretSources = c.Secrets
	if err := writeJSONFile(filepath.Join(dir, "base_state.json"), s); err != nil {
		return err
	}
	m := metaFile{
		ID: c.ID.dashed(), Title: c.Title, Tags: c.Tags, CreatedAt: pyTime(c.CreatedAt),
		UpdatedAt: pyTime(c.UpdatedAt), Agent: c.Agent, Workspace: c.Workspace,
		MaxIterations: c.MaxIterations, StuckDetection: c.StuckDetection, Autotitle: &c.Autotitle,
	}
	return writeJSONFile(filepath.Join(dir, "meta.json"), m)
}

// appendEvent writes events/event-NNNNN-<event id>.json and publishes the
// event to the conversation's sockets. The caller holds st.mu, so events
// reach every socket in the order they are stored.
func (st *store) appendEvent(c *conversation, ev map[string]any) error {
	id := newUUID().dashed()
	ev["id"] = id
	dir := filepath.Join(st.convDir(c.ID), "events")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	name := fmt.Sprintf("event-%05d-%s.json", c.nextEvent, id)
	if err := writeJSONFile(filepath.Join(dir, name), ev); err != nil {
		return err
	}
	c.nextEvent++
	frame, err := eventFrame(ev)
	if err != nil {
		return fmt.Errorf("event %s: %w", id, err)
	}
	c.events.publish(frame)
	return nil
}

// events reads c's stored events in the order they were appended. A file
// that cannot be read is skipped, as upstream skips an unreadable event.
func (st *store) events(c *conversation) ([]map[string]any, error) {
	dir := filepath.Join(st.convDir(c.ID), "events")
	entries, err := os.ReadDir(dir) // sorted by name: event-NNNNN-…
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "event-") || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		var ev map[string]any
		if err := readJSONFile(filepath.Join(dir, e.Name()), &ev); err != nil {
			st.log.Warn("skipping unreadable event", "conversation", c.ID.dashed(), "file", e.Name(), "err", err)
			continue
		}
		out = append(out, ev)
	}
	return out, nil
}

// remove forgets the conversation and deletes its directory. Its sockets
// stay open, as upstream's do, but are dropped from its subscribers.
func (st *store) remove(id uuid) error {
	if c, ok := st.convs[id]; ok {
		c.closed = true
		c.events.clear()
	}
	delete(st.convs, id)
	return os.RemoveAll(st.convDir(id))
}

func readJSONFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}

// writeJSONFile replaces path atomically, so a kill mid-write leaves the old
// file or the new one, never half of one.
func writeJSONFile(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
