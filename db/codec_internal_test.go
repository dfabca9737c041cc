package db

import (
	"database/sql"
	"encoding/json"
	"reflect"
	"testing"
)

// mapOf's fast path must decode exactly what encoding/json decodes, and
// leave to it everything it does not handle.
func TestMapOfMatchesEncodingJSON(t *testing.T) {
	marshal := func(m map[string]string) string {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	inputs := []string{
		`{}`, `{"image":"ghcr.io/canvasapp/agent-server:latest"}`, `{"a":"","b":"c"}`, `{"":""}`,
		`{"a":"1","a":"2"}`, `{"ü":"✓ ok"}`,
		marshal(map[string]string{"quote": `"x"`, "lt": "<b>", "nl": "a\nb", "tab": "\t", "bs": `\`}),
		marshal(map[string]string{"region": "fra1", "size": "s-2vcpu-4gb", "image": "agent:latest"}),
		// Not what json.Marshal writes, or not valid: decoded (or refused)
		// by encoding/json.
		`{ "a": "b" }`, `{"a":"b",}`, `{"a":"b"`, `{"a"}`, `{"a":1}`, `{"a":null}`, `{"a":"b"}x`,
		`{"a":"b""c":"d"}`, `{"a":"\u00e9"}`, "{\"a\":\"\xff\"}", "{\"a\":\"\x01\"}", `{"a":"b\"}`, `[]`, `null`, ``, `{`, `}`,
	}
	for _, in := range inputs {
		var want map[string]string
		wantErr := json.Unmarshal([]byte(in), &want)
		got, gotErr := mapOf("options of workspace", "ws_1", sql.NullString{String: in, Valid: true})
		if (wantErr != nil) != (gotErr != nil) {
			t.Errorf("%q: error %v, encoding/json's %v", in, gotErr, wantErr)
			continue
		}
		if wantErr == nil && (!reflect.DeepEqual(got, want) || (got == nil) != (want == nil)) {
			t.Errorf("%q: got %#v, encoding/json decodes %#v", in, got, want)
		}
	}
	if m, err := mapOf("options of workspace", "ws_1", sql.NullString{}); m != nil || err != nil {
		t.Errorf("NULL: got %#v, %v; want a nil map", m, err)
	}
}

func FuzzMapOf(f *testing.F) {
	f.Add(`{"image":"x"}`)
	f.Add(`{"a":"b","c":"d"}`)
	f.Fuzz(func(t *testing.T, in string) {
		var want map[string]string
		wantErr := json.Unmarshal([]byte(in), &want)
		got, gotErr := mapOf("options", "ws", sql.NullString{String: in, Valid: true})
		if (wantErr != nil) != (gotErr != nil) || (wantErr == nil && !reflect.DeepEqual(got, want)) {
			t.Fatalf("%q: got %#v, %v; encoding/json %#v, %v", in, got, gotErr, want, wantErr)
		}
	})
}
