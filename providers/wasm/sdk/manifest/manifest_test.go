package manifest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func base() map[string]any {
	return map[string]any{
		"name":        "acme",
		"version":     "1.2.3",
		"abi_version": 1,
		"description": "Acme sandboxes",
		"upstreams": map[string]any{
			"api":  map[string]any{"base_url": "https://api.acme.example/v2/", "override": "api_url"},
			"logs": map[string]any{"base_url": "https://logs.acme.example"},
		},
		"credentials": []any{
			map[string]any{"name": "token", "description": "API token", "header": "Authorization", "format": "Bearer {token}", "upstreams": []any{"api"}},
			map[string]any{"name": "logs_key", "description": "Log key", "header": "X-API-Key", "upstreams": []any{"logs"}},
		},
		"config": []any{
			map[string]any{"name": "api_url", "description": "Self-hosted API"},
			map[string]any{"name": "region", "description": "Region", "required": true},
		},
		"limits":       map[string]any{"memory_mib": 32},
		"capabilities": map[string]any{"list": true, "suspend": true, "suspend_keeps_files": true},
	}
}

func parse(t *testing.T, m map[string]any) (*Manifest, error) {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return Parse(b)
}

func TestValidManifest(t *testing.T) {
	m, err := parse(t, base())
	if err != nil {
		t.Fatal(err)
	}
	if m.Limits.MemoryMiB != 32 || m.Limits.CallTimeoutMS != DefaultCallTimeoutMS ||
		m.Limits.ResponseBytes != DefaultResponseBytes || m.Limits.RequestsPerCall != DefaultRequestsPerCall {
		t.Fatalf("limits %+v", m.Limits)
	}
	if m.Credentials[1].Format != "{token}" || m.Credentials[0].HeaderLine() != "Authorization: Bearer {token}" {
		t.Fatalf("credentials %+v", m.Credentials)
	}
	if got := strings.Join(m.Hosts(), " "); got != "https://api.acme.example:443 https://logs.acme.example:443" {
		t.Fatal(got)
	}
}

// An example is optional (added within ABI v1): a manifest without one is
// valid, and one with it carries it through.
func TestConfigExample(t *testing.T) {
	m := base()
	m["config"].([]any)[0].(map[string]any)["example"] = "https://acme.example.com/api"
	got, err := parse(t, m)
	if err != nil {
		t.Fatal(err)
	}
	if got.Config[0].Example != "https://acme.example.com/api" || got.Config[1].Example != "" {
		t.Fatalf("config %+v", got.Config)
	}
}

func TestInvalidManifestNamesField(t *testing.T) {
	set := func(path string, v any) func(map[string]any) {
		return func(m map[string]any) {
			parts := strings.Split(path, ".")
			cur := m
			for _, p := range parts[:len(parts)-1] {
				switch next := cur[p].(type) {
				case map[string]any:
					cur = next
				case []any:
					cur = next[0].(map[string]any)
				}
			}
			if v == nil {
				delete(cur, parts[len(parts)-1])
			} else {
				cur[parts[len(parts)-1]] = v
			}
		}
	}
	cases := []struct {
		name  string
		edit  func(map[string]any)
		field string
		says  string
	}{
		{"no name", set("name", nil), "name", "must be"},
		{"bad name", set("name", "Acme!"), "name", "a-z"},
		{"bad version", set("version", "v1"), "version", "semantic version"},
		{"no abi", set("abi_version", nil), "abi_version", "required"},
		{"newer abi", set("abi_version", 2), "abi_version", "update companion"},
		{"abi type", set("abi_version", "1"), "abi_version", "integer"},
		{"no description", set("description", ""), "description", "required"},
		{"no upstreams", set("upstreams", map[string]any{}), "upstreams", "at least one"},
		{"http base", set("upstreams.api.base_url", "http://api.acme.example"), "upstreams.api.base_url", "https://"},
		{"base with query", set("upstreams.api.base_url", "https://api.acme.example/?x=1"), "upstreams.api.base_url", "query"},
		{"base with user", set("upstreams.api.base_url", "https://u:p@api.acme.example"), "upstreams.api.base_url", "user info"},
		{"base no host", set("upstreams.api.base_url", "https:///x"), "upstreams.api.base_url", "no host"},
		{"override unknown", set("upstreams.api.override", "nope"), "upstreams.api.override", "not declared"},
		{"bad upstream name", func(m map[string]any) {
			m["upstreams"].(map[string]any)["Bad-Name"] = map[string]any{"base_url": "https://x.example"}
		}, "upstreams.Bad-Name", "name"},
		{"credential header", set("credentials.header", "Cookie"), "credentials[0].header", "cannot carry"},
		{"credential header syntax", set("credentials.header", "X Bad"), "credentials[0].header", "header name"},
		{"proxy header", set("credentials.header", "Proxy-Authorization"), "credentials[0].header", "cannot carry"},
		{"format without token", set("credentials.format", "Bearer"), "credentials[0].format", "{token}"},
		{"format twice", set("credentials.format", "{token}{token}"), "credentials[0].format", "exactly once"},
		{"format newline", set("credentials.format", "Bearer {token}\r\nX: y"), "credentials[0].format", "printable"},
		{"credential no upstreams", set("credentials.upstreams", []any{}), "credentials[0].upstreams", "at least one"},
		{"credential unknown upstream", set("credentials.upstreams", []any{"nope"}), "credentials[0].upstreams[0]", "not declared"},
		{"credential no description", set("credentials.description", ""), "credentials[0].description", "required"},
		{"credential named like config", set("credentials.name", "region"), "credentials[0].name", "config field"},
		{"config dup", func(m map[string]any) {
			m["config"] = append(m["config"].([]any), map[string]any{"name": "region", "description": "again"})
		}, "config[2].name", "twice"},
		{"config bad name", set("config.name", "API URL"), "config[0].name", "a-z"},
		{"config example too long", set("config.example", strings.Repeat("x", 201)), "config[0].example", "longer than 200"},
		{"config example newline", set("config.example", "a\nb"), "config[0].example", "control"},
		{"option example too long", func(m map[string]any) {
			m["options"] = []any{map[string]any{"name": "image", "description": "x", "example": strings.Repeat("x", 201)}}
		}, "options[0].example", "longer than 200"},
		{"option bad name", func(m map[string]any) {
			m["options"] = []any{map[string]any{"name": "Image Name", "description": "x"}}
		}, "options[0].name", "a-z"},
		{"option dup", func(m map[string]any) {
			m["options"] = []any{map[string]any{"name": "image", "description": "x"}, map[string]any{"name": "image", "description": "y"}}
		}, "options[1].name", "twice"},
		{"memory too high", set("limits.memory_mib", 4096), "limits.memory_mib", "ceiling 512"},
		{"memory negative", set("limits.memory_mib", -1), "limits.memory_mib", "minimum"},
		{"timeout too high", set("limits.call_timeout_ms", 3_600_000), "limits.call_timeout_ms", "ceiling"},
		{"response too high", set("limits.response_bytes", 1<<30), "limits.response_bytes", "ceiling"},
		{"requests too high", set("limits.requests_per_call", 100000), "limits.requests_per_call", "ceiling"},
		{"unknown limit", set("limits.cpu", 2), "cpu", "unknown field"},
		{"unknown capability", set("capabilities.teleport", true), "teleport", "unknown field"},
		{"unknown top-level", set("hosts", []any{"x"}), "hosts", "unknown field"},
		{"keeps files without suspend", set("capabilities.suspend", false), "capabilities.suspend_keeps_files", "needs capabilities.suspend"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := base()
			c.edit(m)
			_, err := parse(t, m)
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("want *Error, got %v", err)
			}
			if fe.Field != c.field || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got field %q: %v; want field %q saying %q", fe.Field, err, c.field, c.says)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Fatalf("message does not name the field: %v", err)
			}
		})
	}
}

func TestManifestDocumentErrors(t *testing.T) {
	for in, want := range map[string]string{
		``:                              "empty",
		`{`:                             "invalid JSON",
		`[]`:                            "must be an object",
		`{"name":"x"} {}`:               "trailing data",
		`{"limits":{"memory_mib":"a"}}`: "limits.memory_mib",
	} {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", in, err, want)
		}
	}
	if _, err := Parse([]byte(strings.Repeat(" ", MaxSize+1))); err == nil {
		t.Error("oversized manifest accepted")
	}
}

func TestSameHeaderTwiceOnOneUpstream(t *testing.T) {
	m := base()
	creds := m["credentials"].([]any)
	creds[1].(map[string]any)["header"] = "authorization"
	creds[1].(map[string]any)["upstreams"] = []any{"api"}
	_, err := parse(t, m)
	if err == nil || !strings.Contains(err.Error(), "credentials[1].header") || !strings.Contains(err.Error(), "both set") {
		t.Fatalf("%v", err)
	}
}

func TestParseBaseURL(t *testing.T) {
	u, err := ParseBaseURL("https://API.Example:8443/v1/", false)
	if err != nil || u.Host != "api.example:8443" || u.Path != "/v1" {
		t.Fatalf("%v %v", u, err)
	}
	if Origin(u) != "https://api.example:8443" {
		t.Fatal(Origin(u))
	}
	if _, err := ParseBaseURL("http://127.0.0.1:9/", true); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseBaseURL("http://127.0.0.1:9/", false); err == nil {
		t.Fatal("http accepted")
	}
	if _, err := ParseBaseURL("https://x.example:99999", false); err == nil {
		t.Fatal("bad port accepted")
	}
}

func TestManifestOptions(t *testing.T) {
	m, err := parse(t, base())
	if err != nil {
		t.Fatal(err)
	}
	if m.Options != nil {
		t.Fatalf("absent options must stay undeclared (nil), got %+v", m.Options)
	}
	b := base()
	b["options"] = []any{}
	if m, err = parse(t, b); err != nil || m.Options == nil || len(m.Options) != 0 {
		t.Fatalf("an empty options list must be kept as declared-empty: %+v %v", m.Options, err)
	}
	b["options"] = []any{map[string]any{"name": "template", "description": "Template id"}}
	if m, err = parse(t, b); err != nil || len(m.Options) != 1 || m.Options[0].Name != "template" {
		t.Fatalf("options %+v %v", m.Options, err)
	}
}
