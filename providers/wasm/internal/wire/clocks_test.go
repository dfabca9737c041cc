package wire

import (
	"reflect"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
	sdkmanifest "github.com/canvasapp/companion/providers/wasm/sdk/manifest"
)

func TestClocks(t *testing.T) {
	m, err := manifest.Parse([]byte(`{"name":"acme","version":"1.0.0","abi_version":1,"description":"Acme",
		"upstreams":{"api":{"base_url":"https://api.acme.example"}},
		"capabilities":{"list":true,"suspend":true,"native_paused_ttl":true},
		"clocks":[
			{"name":"auto_delete","starts":"paused","after_seconds":0,"loses":"box","setting":true,"note":"autoDeleteInterval"},
			{"name":"sleep_wipe","starts":"idle","after_seconds":600,"loses":"files"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []core.DeletionClock{
		{Name: "auto_delete", Starts: core.ClockStartsPaused, Loses: core.ClockLosesBox, Setting: true, Note: "autoDeleteInterval"},
		{Name: "sleep_wipe", Starts: core.ClockStartsIdle, After: 10 * time.Minute, Loses: core.ClockLosesFiles},
	}
	if got := Clocks(m.Clocks); !reflect.DeepEqual(got, want) {
		t.Fatalf("clocks %+v, want %+v", got, want)
	}
}

func TestNoClocksIsAnEmptyList(t *testing.T) {
	if got := Clocks(nil); got == nil || len(got) != 0 {
		t.Fatalf("a module without clocks: %#v, want an empty, non-nil list", got)
	}
}

// The SDK's words are core's: a value the manifest accepts is one core
// knows.
func TestClockWordsAgreeWithCore(t *testing.T) {
	for sdk, c := range map[string]string{
		sdkmanifest.ClockPaused:     core.ClockStartsPaused,
		sdkmanifest.ClockIdle:       core.ClockStartsIdle,
		sdkmanifest.ClockLosesBox:   core.ClockLosesBox,
		sdkmanifest.ClockLosesFiles: core.ClockLosesFiles,
	} {
		if sdk != c {
			t.Errorf("SDK says %q where core says %q", sdk, c)
		}
	}
}
