package secrets

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport"
)

// newKeyring returns a Keyring with a namespace unique to the test. Tests
// run against the real OS keyring: `make test` starts a private D-Bus
// session with gnome-keyring. Outside it they are skipped, unless
// COMPANION_REQUIRE_KEYRING=1 (set by make test and CI) makes that a failure.
func newKeyring(t *testing.T) *Keyring {
	t.Helper()
	k := &Keyring{Namespace: core.NewID("test")}
	testsupport.NeedKeyring(t, k)
	return k
}

func TestKeyringRoundTrip(t *testing.T) {
	ctx := context.Background()
	k := newKeyring(t)
	const secret = "tok-3f9a-very-secret"
	if err := k.Set(ctx, "account/a1/api_key", secret); err != nil {
		t.Fatal(err)
	}
	got, err := k.Get(ctx, "account/a1/api_key")
	if err != nil || got != secret {
		t.Fatalf("Get = %q, %v; want the stored value", got, err)
	}
	if err := k.Set(ctx, "account/a1/api_key", secret+"2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := k.Get(ctx, "account/a1/api_key"); got != secret+"2" {
		t.Fatalf("after overwrite Get = %q", got)
	}
	if err := k.Delete(ctx, "account/a1/api_key"); err != nil {
		t.Fatal(err)
	}
	_, err = k.Get(ctx, "account/a1/api_key")
	if !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("Get after Delete: %v, want not_found", err)
	}
	if err := k.Delete(ctx, "account/a1/api_key"); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("second Delete: %v, want not_found", err)
	}
}

func TestKeyringNamespacesAreIsolated(t *testing.T) {
	ctx := context.Background()
	a := newKeyring(t)
	b := &Keyring{Namespace: core.NewID("test")}
	if err := a.Set(ctx, "k", "value-a"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Delete(ctx, "k") })
	if _, err := b.Get(ctx, "k"); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("other namespace sees the entry: %v", err)
	}
}

func TestKeyringUnavailableSaysWhatToDo(t *testing.T) {
	// The D-Bus session connection is process-wide and cached, so the
	// missing-bus case runs in a child process of this test binary.
	if os.Getenv("COMPANION_KEYRING_CHILD") == "1" {
		k := &Keyring{Namespace: "ns"}
		err := k.Set(context.Background(), "account/x/token", "value-must-not-leak")
		if !core.IsKind(err, core.KindUnavailable) {
			t.Fatalf("Set on a missing bus: %v, want unavailable", err)
		}
		if msg := err.Error(); strings.Contains(msg, "value-must-not-leak") || !strings.Contains(msg, "Secret Service") {
			t.Fatalf("unhelpful or leaking message: %q", msg)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKeyringUnavailableSaysWhatToDo$", "-test.v")
	cmd.Env = append(os.Environ(), "COMPANION_KEYRING_CHILD=1", "DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent/companion-test-bus")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
