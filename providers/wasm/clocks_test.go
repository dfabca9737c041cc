package wasm

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

// A module's deletion clocks come from its manifest: companion's
// description of the provider carries them in core's form, and inspect in
// the API's (seconds), without running the module.
func TestModuleClocks(t *testing.T) {
	e := newEnv(t)
	bin := repack(t, goodWasm, func(m map[string]any) {
		m["clocks"] = []any{
			map[string]any{"name": "paused_reaper", "starts": "paused", "after_seconds": 86400, "loses": "box", "note": "runtimes paused a day are reaped"},
			map[string]any{"name": "sleep_wipe", "starts": "idle", "after_seconds": 600, "loses": "files"},
		}
	})
	info, err := e.load(t, bin).Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []core.DeletionClock{
		{Name: "paused_reaper", Starts: core.ClockStartsPaused, After: 24 * time.Hour, Loses: core.ClockLosesBox, Note: "runtimes paused a day are reaped"},
		{Name: "sleep_wipe", Starts: core.ClockStartsIdle, After: 10 * time.Minute, Loses: core.ClockLosesFiles},
	}
	if !reflect.DeepEqual(info.Clocks, want) {
		t.Fatalf("describe clocks %+v, want %+v", info.Clocks, want)
	}

	s, err := e.host.Inspect(context.Background(), bin)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s)
	if !strings.Contains(string(b), `"clocks":[{"name":"paused_reaper","starts":"paused","after_seconds":86400,"loses":"box","setting":false,"note":"runtimes paused a day are reaped"},`) {
		t.Fatalf("inspect answer: %s", b)
	}
	for _, line := range []string{"paused_reaper: deletes the box 1 day after it stops", "runtimes paused a day are reaped",
		"sleep_wipe: wipes the box's files 10 minutes after its last activity"} {
		if !strings.Contains(s.String(), line) {
			t.Errorf("inspect text lacks %q:\n%s", line, s)
		}
	}
}

// Modules from before clocks declare none and work as they did; the
// provider then says so with an empty list.
func TestModuleWithoutClocks(t *testing.T) {
	e := newEnv(t)
	info, err := e.load(t, goodWasm).Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Clocks == nil || len(info.Clocks) != 0 {
		t.Fatalf("clocks %#v, want an empty list", info.Clocks)
	}
	s, err := e.host.Inspect(context.Background(), goodWasm)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(s); !strings.Contains(string(b), `"clocks":[]`) {
		t.Fatalf("inspect answer: %s", b)
	}
	if !strings.Contains(s.String(), "Deletion clocks: none") {
		t.Fatalf("inspect text:\n%s", s)
	}
}

// A module whose embedded manifest declares a bad clock (embedded by hand:
// the packer would refuse it) is refused at inspect, install and load,
// naming the field, before any of it runs.
func TestHostileClocksRefused(t *testing.T) {
	e := newEnv(t)
	good := e.load(t, goodWasm)
	clock := func(k string, v any) map[string]any {
		c := map[string]any{"name": "reaper", "starts": "paused", "after_seconds": 3600, "loses": "box"}
		c[k] = v
		return c
	}
	many := []any{}
	for i := range 100 {
		many = append(many, clock("name", "c"+strings.Repeat("x", i%31)+string(rune('a'+i%26))))
	}
	cases := []struct {
		name   string
		clocks []any
		says   []string
	}{
		{"unknown starts", []any{clock("starts", "created")}, []string{"clocks[0].starts", `must be "paused"`}},
		{"unknown loses", []any{clock("loses", "everything")}, []string{"clocks[0].loses", `must be "box"`}},
		{"negative", []any{clock("after_seconds", -60)}, []string{"clocks[0].after_seconds", "positive"}},
		{"absurd", []any{clock("after_seconds", int64(1)<<62)}, []string{"clocks[0].after_seconds", "ceiling"}},
		{"too many", many, []string{"clocks", "more than 8"}},
		{"long note", []any{clock("note", strings.Repeat("n", 301))}, []string{"clocks[0].note", "longer than 300"}},
		{"setting without the capability", []any{clock("setting", true)}, []string{"clocks[0].setting", "native_paused_ttl"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(mustManifest(t, watModule(t, "static_list", nil)), &m); err != nil {
				t.Fatal(err)
			}
			m["clocks"] = c.clocks
			_, err := Pack(watRaw["static_list"], mustJSON(t, m))
			mustKind(t, err, core.KindInvalid, c.says...)
			bad := appendCustomSection(watRaw["static_list"], ManifestSection, mustJSON(t, m))
			_, err = e.host.Inspect(context.Background(), bad)
			mustKind(t, err, core.KindInvalid, c.says...)
			_, err = e.host.Install(context.Background(), bad)
			mustKind(t, err, core.KindInvalid, c.says...)
			_, err = e.host.LoadEmbedded(bad)
			mustKind(t, err, core.KindInvalid, c.says...)
		})
	}
	servesStill(t, good, nil, nil)
}

func TestClockWords(t *testing.T) {
	for _, tc := range []struct {
		c    ClockSummary
		want string
	}{
		{ClockSummary{Starts: "paused", Loses: "box", Setting: true}, "deletes the box the paused TTL after it stops, when asked at create"},
		{ClockSummary{Starts: "idle", Loses: "box"}, "may destroy an idle box after a period it does not publish"},
		{ClockSummary{Starts: "paused", Loses: "files"}, "may wipe the files of a stopped box after a period it does not publish"},
		{ClockSummary{Starts: "paused", Loses: "box", AfterSeconds: 86400}, "deletes the box 1 day after it stops"},
		{ClockSummary{Starts: "idle", Loses: "files", AfterSeconds: 600}, "wipes the box's files 10 minutes after its last activity"},
		{ClockSummary{Starts: "paused", Loses: "box", AfterSeconds: 30 * 86400}, "deletes the box 30 days after it stops"},
		{ClockSummary{Starts: "paused", Loses: "box", AfterSeconds: 90}, "deletes the box 90 seconds after it stops"},
	} {
		if got := tc.c.Words(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.c, got, tc.want)
		}
	}
}
