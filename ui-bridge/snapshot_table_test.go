package uibridge

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/core"
)

// tableSnapshot is a snapshot message in table form, as a client sees it.
type tableSnapshot struct {
	Type       string              `json:"type"`
	Rev        int64               `json:"rev"`
	ServerTime time.Time           `json:"server_time"`
	Fields     []string            `json:"fields"`
	Rows       [][]json.RawMessage `json:"rows"`
	Workspaces json.RawMessage     `json:"workspaces"`
}

// rowObjects turns rows back into workspace objects by API.md's rule: a
// null or missing value is an absent field, "a.b" is field b of object a.
func rowObjects(t *testing.T, fields []string, rows [][]json.RawMessage) []map[string]any {
	t.Helper()
	out := make([]map[string]any, 0, len(rows))
	for _, row := range rows {
		if len(row) > len(fields) {
			t.Fatalf("a row of %d values for %d fields", len(row), len(fields))
		}
		obj := map[string]any{}
		for i, raw := range row {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatalf("value %s: %v", raw, err)
			}
			if v == nil {
				continue
			}
			if outer, inner, nested := strings.Cut(fields[i], "."); nested {
				m, _ := obj[outer].(map[string]any)
				if m == nil {
					m = map[string]any{}
					obj[outer] = m
				}
				m[inner] = v
				continue
			}
			obj[fields[i]] = v
		}
		out = append(out, obj)
	}
	return out
}

func readRaw(t *testing.T, c *websocket.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read stream message: %v", err)
	}
	return b
}

// TestStreamTableSnapshotSameAsObjects: ?snapshot=table sends the same
// workspaces as the object form, field for field (values that need
// escaping, a zero exit code, nested lifecycle settings, every optional
// field set and none set), smaller; deltas stay objects; and a ?since=
// the server cannot serve answers with a table snapshot too.
func TestStreamTableSnapshotSameAsObjects(t *testing.T) {
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	clock := &manualClock{t: base.Add(time.Hour)} // the reuse window never runs out
	e := newEnv(t, func(c *Config) { c.Now = clock.Now })
	bare := testWorkspace("bare")
	bare.BoxID = ""
	bare.CreatedAt = base
	e.save(bare)
	full := testWorkspace(`quote " backslash \ <tag> & é ✓ ` + "\u2028 tab\t")
	full.CreatedAt = base.Add(time.Second)
	full.State = core.StateStopped
	full.BoxURL = "http://127.0.0.1:1234/?a=1&b=2"
	full.Adopted = true
	full.PausedAt = base.Add(time.Minute)
	full.StopReason = core.StopExited
	zero := 0
	full.ExitCode = &zero
	full.Size = &core.Size{Bytes: 1 << 40, Source: core.SizeAgentServerUsed, At: base.Add(2 * time.Minute)}
	full.LastActivityAt = base.Add(3 * time.Minute)
	full.Keep = true
	full.DeleteAfter = base.Add(48 * time.Hour)
	full.Lifecycle = core.Lifecycle{IdlePauseAfter: time.Hour, PausedTTL: 24 * time.Hour}
	full.Progress = "pulling image: 1 of 2 layers"
	full.Error = "it went \"wrong\"\n"
	e.save(full)
	half := testWorkspace("half lifecycle")
	half.CreatedAt = base.Add(2 * time.Second)
	half.Lifecycle = core.Lifecycle{PausedTTL: time.Hour}
	half.Progress = "only progress, after many absent fields"
	e.save(half)
	for i := range 20 {
		ws := testWorkspace(fmt.Sprint("plain ", i))
		ws.CreatedAt = base.Add(time.Duration(10+i) * time.Second)
		e.save(ws)
	}

	objRaw := readRaw(t, e.mustDial(""))
	tc := e.mustDial("?snapshot=table")
	tabRaw := readRaw(t, tc)
	// One encoding per form at a revision, shared by the clients of each.
	if again := readRaw(t, e.mustDial("?snapshot=table")); string(again) != string(tabRaw) {
		t.Fatal("two table clients at one revision got different snapshots")
	}
	if n := e.srv.hub.snapEncodings.Load(); n != 2 {
		t.Fatalf("3 clients in 2 forms at one revision: %d encodings, want 2", n)
	}

	var obj struct {
		Type       string           `json:"type"`
		Rev        int64            `json:"rev"`
		Workspaces []map[string]any `json:"workspaces"`
	}
	if err := json.Unmarshal(objRaw, &obj); err != nil {
		t.Fatal(err)
	}
	var tab tableSnapshot
	if err := json.Unmarshal(tabRaw, &tab); err != nil {
		t.Fatal(err)
	}
	if tab.Type != "snapshot" || tab.Rev != obj.Rev || tab.Workspaces != nil || tab.ServerTime.IsZero() {
		t.Fatalf("table snapshot head: type %q rev %d (object form: %d), workspaces %s", tab.Type, tab.Rev, obj.Rev, tab.Workspaces)
	}
	got := rowObjects(t, tab.Fields, tab.Rows)
	if len(obj.Workspaces) != 23 || !reflect.DeepEqual(got, obj.Workspaces) {
		t.Fatalf("the table form decodes to\n%v\nthe object form is\n%v", got, obj.Workspaces)
	}
	if len(tabRaw) >= len(objRaw)*3/4 {
		t.Fatalf("table form %d bytes, object form %d", len(tabRaw), len(objRaw))
	}
	// The bare workspace is the oldest, so last: its row stops after its
	// last set field.
	if last := tab.Rows[len(tab.Rows)-1]; len(last) != 8 {
		t.Fatalf("a row with only the always-present fields has %d values: %s", len(last), tabRaw[len(tabRaw)-300:])
	}

	// Deltas on a table connection are the usual objects.
	up := testWorkspace("after")
	up = e.save(up)
	m := readMsg(t, tc)
	if m.Type != "upsert" || m.Workspace == nil {
		t.Fatalf("after a change: %+v", m)
	}
	sameWire(t, *m.Workspace, up)

	// A revision from the future: a fresh snapshot, in the form asked for.
	c := e.mustDial(fmt.Sprintf("?snapshot=table&since=%d", up.Rev+1000))
	var again tableSnapshot
	if err := json.Unmarshal(readRaw(t, c), &again); err != nil {
		t.Fatal(err)
	}
	if again.Type != "snapshot" || again.Rev != up.Rev || len(again.Rows) != 24 || again.Workspaces != nil {
		t.Fatalf("snapshot after an unknown since: type %q rev %d, %d rows", again.Type, again.Rev, len(again.Rows))
	}
	// Any other value is the object form.
	var other Message
	if err := json.Unmarshal(readRaw(t, e.mustDial("?snapshot=columns")), &other); err != nil || len(other.Workspaces) != 24 {
		t.Fatalf("?snapshot=columns: %d workspaces (%v)", len(other.Workspaces), err)
	}
}

// TestTableFieldsCoverTheWireForm: every field of the object form has a
// column, so a field added to Workspace cannot be forgotten in rows.
func TestTableFieldsCoverTheWireForm(t *testing.T) {
	var names []string
	for _, c := range tableColumns {
		names = append(names, c.name)
	}
	var walk func(prefix string, typ reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Type == reflect.TypeFor[Lifecycle]() || f.Type == reflect.TypeFor[Deletion]() {
				walk(prefix+name+".", f.Type)
				continue
			}
			if !slices.Contains(names, prefix+name) {
				t.Errorf("Workspace field %s has no column in the table form", prefix+name)
			}
		}
	}
	walk("", reflect.TypeFor[Workspace]())
	if len(names) != 30 {
		t.Errorf("%d columns", len(names))
	}
}
