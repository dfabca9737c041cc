package manifest

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// withClocks is base() with the paused TTL capability and clocks.
func withClocks(clocks ...any) map[string]any {
	m := base()
	m["capabilities"].(map[string]any)["native_paused_ttl"] = true
	m["clocks"] = clocks
	return m
}

func TestClocksRoundTrip(t *testing.T) {
	m, err := parse(t, withClocks(
		map[string]any{"name": "auto_delete", "starts": "paused", "after_seconds": 0, "loses": "box", "setting": true,
			"note": "autoDeleteInterval, set from the paused TTL (providers.md §1)"},
		map[string]any{"name": "inactivity_destroy", "starts": "idle", "loses": "box"},
	))
	if err != nil {
		t.Fatal(err)
	}
	want := []Clock{
		{Name: "auto_delete", Starts: ClockPaused, Loses: ClockLosesBox, Setting: true, Note: "autoDeleteInterval, set from the paused TTL (providers.md §1)"},
		{Name: "inactivity_destroy", Starts: ClockIdle, Loses: ClockLosesBox},
	}
	if !reflect.DeepEqual(m.Clocks, want) {
		t.Fatalf("clocks %+v, want %+v", m.Clocks, want)
	}
	// What a manifest built in Go marshals to parses back the same.
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(again.Clocks, want) {
		t.Fatalf("after a round trip: %+v", again.Clocks)
	}
}

func TestNoClocks(t *testing.T) {
	// Manifests from before clocks have none, and still parse.
	m, err := parse(t, base())
	if err != nil || len(m.Clocks) != 0 {
		t.Fatalf("%+v %v", m.Clocks, err)
	}
	b, _ := json.Marshal(m)
	if strings.Contains(string(b), "clocks") {
		t.Fatalf("a manifest without clocks marshals them: %s", b)
	}
}

// TestClocksOfLaterProviders: the format can say the clocks known of
// providers that have no module yet (providers-wave3.md, providers.md).
func TestClocksOfLaterProviders(t *testing.T) {
	_, err := parse(t, withClocks(
		// OpenHands runtime-api: timed-out runtimes reaped about daily.
		map[string]any{"name": "paused_reaper", "starts": "paused", "after_seconds": 86400, "loses": "box",
			"note": "runtimes paused about a day are deleted (OpenHands#5083, secondhand) [uncertain]"},
		// Modal: a directory snapshot is kept 30 days after last use.
		map[string]any{"name": "snapshot_expiry", "starts": "idle", "after_seconds": 30 * 86400, "loses": "box"},
		// Cloudflare Sandbox: sleepAfter (10 min) loses every file.
		map[string]any{"name": "sleep_wipe", "starts": "idle", "after_seconds": 600, "loses": "files"},
	))
	if err != nil {
		t.Fatal(err)
	}
}

func TestInvalidClocksNameField(t *testing.T) {
	clock := func(edit func(map[string]any)) map[string]any {
		c := map[string]any{"name": "auto_delete", "starts": "paused", "after_seconds": 3600, "loses": "box"}
		edit(c)
		return c
	}
	set := func(k string, v any) func(map[string]any) { return func(c map[string]any) { c[k] = v } }
	many := make([]any, MaxClocks+1)
	for i := range many {
		many[i] = clock(set("name", "c"+strings.Repeat("x", i)))
	}
	cases := []struct {
		name     string
		manifest map[string]any
		field    string
		says     string
	}{
		{"too many", withClocks(many...), "clocks", "more than 8"},
		{"no name", withClocks(clock(set("name", ""))), "clocks[0].name", "a-z"},
		{"bad name", withClocks(clock(set("name", "Auto-Delete"))), "clocks[0].name", "a-z"},
		{"twice", withClocks(clock(set("name", "x")), clock(set("name", "x"))), "clocks[1].name", "twice"},
		{"unknown starts", withClocks(clock(set("starts", "stopped"))), "clocks[0].starts", `must be "paused"`},
		{"no starts", withClocks(clock(set("starts", ""))), "clocks[0].starts", `or "idle"`},
		{"negative", withClocks(clock(set("after_seconds", -1))), "clocks[0].after_seconds", "0 (not published) or a positive"},
		{"absurd", withClocks(clock(set("after_seconds", int64(30)*86400*1000))), "clocks[0].after_seconds", "ceiling 31536000"},
		{"unknown loses", withClocks(clock(set("loses", "memory"))), "clocks[0].loses", `must be "box"`},
		{"no loses", withClocks(clock(set("loses", nil))), "clocks[0].loses", `"files"`},
		{"long note", withClocks(clock(set("note", strings.Repeat("é", MaxClockNote+1)))), "clocks[0].note", "longer than 300"},
		{"note on two lines", withClocks(clock(set("note", "one\ntwo"))), "clocks[0].note", "control characters"},
		{"setting without the capability", func() map[string]any {
			m := withClocks(clock(func(c map[string]any) { c["setting"] = true; c["after_seconds"] = 0 }))
			m["capabilities"].(map[string]any)["native_paused_ttl"] = false
			return m
		}(), "clocks[0].setting", "needs capabilities.native_paused_ttl"},
		{"setting from idle", withClocks(clock(func(c map[string]any) { c["setting"] = true; c["after_seconds"] = 0; c["starts"] = "idle" })),
			"clocks[0].starts", "setting clock"},
		{"setting with a period", withClocks(clock(set("setting", true))), "clocks[0].after_seconds", "paused TTL sets its period"},
		{"unknown member", withClocks(clock(set("color", "red"))), "color", "unknown field"},
		{"after as text", withClocks(clock(set("after_seconds", "1d"))), "clocks.after_seconds", "integer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse(t, c.manifest)
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("want *Error, got %v", err)
			}
			if fe.Field != c.field || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got field %q: %v; want field %q saying %q", fe.Field, err, c.field, c.says)
			}
		})
	}
}

// TestPackClocks: the packer validates clocks as install does, and a
// packed manifest carries them.
func TestPackClocks(t *testing.T) {
	b, _ := json.Marshal(withClocks(map[string]any{"name": "x", "starts": "whenever", "loses": "box"}))
	if _, err := Pack(emptyModule, b); err == nil || !strings.Contains(err.Error(), "clocks[0].starts") {
		t.Fatalf("Pack of a bad clock: %v", err)
	}
	b, _ = json.Marshal(withClocks(map[string]any{"name": "sleep_wipe", "starts": "idle", "after_seconds": 600, "loses": "files"}))
	packed, err := Pack(emptyModule, b)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := Extract(packed)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(raw)
	if err != nil || len(m.Clocks) != 1 || m.Clocks[0] != (Clock{Name: "sleep_wipe", Starts: ClockIdle, AfterSeconds: 600, Loses: ClockLosesFiles}) {
		t.Fatalf("packed clocks %+v %v", m, err)
	}
}
