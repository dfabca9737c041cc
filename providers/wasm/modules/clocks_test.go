package modules_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/providers/wasm"
	"github.com/canvasapp/companion/providers/wasm/sdk/manifest"
)

// TestDeletionClocks reads each built module's embedded manifest (what
// companion loads) and checks the deletion clocks it declares against
// the reference (providers.md, agent-server.md §8), that each note cites
// where the fact comes from, and that the host describes the provider
// with them.
func TestDeletionClocks(t *testing.T) {
	host, err := wasm.New(wasm.Config{CacheDir: cacheDir, CompileOnUse: true}) // describes from the manifest
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close(context.Background())
	for _, tc := range []struct {
		module string
		want   []manifest.Clock
		cites  []string
	}{
		{"daytona", []manifest.Clock{{Name: "auto_delete", Starts: manifest.ClockPaused, AfterSeconds: 0, Loses: manifest.ClockLosesBox, Setting: true}},
			[]string{"autoDeleteInterval", "paused TTL", "providers.md §1"}},
		{"digitalocean", []manifest.Clock{{Name: "inactivity_destroy", Starts: manifest.ClockIdle, AfterSeconds: 0, Loses: manifest.ClockLosesBox, Setting: false}},
			[]string{"last_event_at", "agent-server.md §8", "not published", "uncertain"}},
		// The timeout pauses (autoPause is always sent) and paused
		// sandboxes have no documented deletion.
		{"e2b", nil, nil},
		// The idle reaper pauses (native_idle_pause); deletion of long
		// paused runtimes is secondhand.
		{"runtimeapi", []manifest.Clock{{Name: "paused_reaper", Starts: manifest.ClockPaused, AfterSeconds: 86400, Loses: manifest.ClockLosesBox}},
			[]string{"OpenHands#5083", "providers-wave3.md §1.6", "uncertain"}},
		// A sandbox idle for sleepAfter (10 min by default; the bridge
		// sets none) sleeps and loses its files, whatever companion does.
		{"cloudflare", []manifest.Clock{{Name: "sleep_wipe", Starts: manifest.ClockIdle, AfterSeconds: 600, Loses: manifest.ClockLosesFiles}},
			[]string{"sleepAfter", "10m", "files lost"}},
	} {
		t.Run(tc.module, func(t *testing.T) {
			raw, err := manifest.Extract(built[tc.module])
			if err != nil {
				t.Fatal(err)
			}
			m, err := manifest.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			a, err := host.LoadEmbedded(built[tc.module])
			if err != nil {
				t.Fatal(err)
			}
			info, err := a.Describe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(info.Clocks) != len(m.Clocks) {
				t.Fatalf("the host describes %s with clocks %+v, its manifest declares %+v", tc.module, info.Clocks, m.Clocks)
			}
			for i, c := range info.Clocks {
				mc := m.Clocks[i]
				if c.Name != mc.Name || c.Starts != mc.Starts || c.After != time.Duration(mc.AfterSeconds)*time.Second || c.Loses != mc.Loses || c.Setting != mc.Setting || c.Note != mc.Note {
					t.Fatalf("the host describes clock %+v, the manifest declares %+v", c, mc)
				}
			}
			var notes []string
			got := make([]manifest.Clock, len(m.Clocks))
			for i, c := range m.Clocks {
				notes = append(notes, c.Note)
				c.Note = ""
				got[i] = c
			}
			if len(tc.want) == 0 && len(got) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("clocks %+v, want %+v", got, tc.want)
			}
			for _, s := range tc.cites {
				if !strings.Contains(notes[0], s) {
					t.Errorf("note %q does not say %q", notes[0], s)
				}
			}
		})
	}
}
