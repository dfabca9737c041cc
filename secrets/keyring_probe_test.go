package secrets

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
)

func TestKeyringProbe(t *testing.T) {
	if os.Getenv("COMPANION_PROBE_CHILD") == "1" {
		// No bus: the probe fails as unavailable, saying what is missing.
		err := (&Keyring{Namespace: "ns"}).Probe(context.Background(), 2*time.Second)
		if !core.IsKind(err, core.KindUnavailable) || !strings.Contains(err.Error(), "Secret Service") {
			t.Fatalf("Probe without a bus: %v", err)
		}
		return
	}
	k := newKeyring(t)
	if err := k.Probe(context.Background(), 5*time.Second); err != nil {
		t.Fatalf("Probe on a working keyring: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKeyringProbe$", "-test.v")
	cmd.Env = append(os.Environ(), "COMPANION_PROBE_CHILD=1", "DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent/companion-test-bus")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
