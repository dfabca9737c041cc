package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/secrets"
)

// TestRefusalsComeBeforeReady: whatever a flag or the data dir gets wrong
// stops desktop before its ready line (an app that watches for an exit
// until the line learns of it): the sealed store without a key, a data
// dir made with another --docker-scope, a --listen port that is not one.
func TestRefusalsComeBeforeReady(t *testing.T) {
	t.Run("sealed without a key", func(t *testing.T) {
		logs := startRefused(t, noKeyring, "desktop", "--data-dir", t.TempDir(), "--docker-scope", "unused", "--secrets", "sealed")
		if !strings.Contains(logs, "--secrets sealed needs a key") {
			t.Fatalf("the refusal does not say the key is missing:\n%s", logs)
		}
	})
	t.Run("another docker scope", func(t *testing.T) {
		data := t.TempDir()
		p := start(t, options{dataDir: data, args: []string{"--docker-scope", "scope-a"}})
		p.must(200, "GET", "/v1/workspaces", nil, nil)
		p.stop()
		logs := startRefused(t, nil, "desktop", "--data-dir", data, "--docker-scope", "scope-b")
		if !strings.Contains(logs, "start with --docker-scope scope-a") {
			t.Fatalf("the refusal does not name the data dir's scope:\n%s", logs)
		}
	})
	t.Run("listen port", func(t *testing.T) {
		for _, addr := range []string{"127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:eighty"} {
			logs := startRefused(t, noKeyring, "desktop", "--data-dir", t.TempDir(), "--docker-scope", "unused", "--listen", addr)
			if !strings.Contains(logs, "not a number from 0 to 65535") {
				t.Fatalf("--listen %s: the refusal does not say what a port is:\n%s", addr, logs)
			}
		}
	})
}

// waitLog waits for a line containing want on p's stderr.
func waitLog(t *testing.T, p *proc, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(p.stderr.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line containing %q", want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestNoSessionBusStartsNoDaemons: without a D-Bus session bus, the D-Bus
// library would autolaunch one (dbus-launch) at the first keyring call,
// and the bus daemon and the keyring daemon it activates would outlive
// companion. Neither `accounts add` nor `desktop` may leave a process
// behind; both say the keyring cannot be reached and what to do instead.
// dbus-launch must be installed (Debian's dbus-x11; scripts/setup.sh
// --test installs it), or the test would prove nothing.
func TestNoSessionBusStartsNoDaemons(t *testing.T) {
	if _, err := exec.LookPath("dbus-launch"); err != nil {
		t.Fatalf("dbus-launch (Debian's dbus-x11) is needed to show that companion does not autolaunch a bus: %v", err)
	}
	if _, err := os.Stat(fmt.Sprintf("/run/user/%d/bus", os.Getuid())); err == nil {
		t.Skip("this user has a session bus at /run/user/UID/bus: nothing would be autolaunched")
	}
	marker := processMarker(t)
	env := []string{"DBUS_SESSION_BUS_ADDRESS=", "CREDENTIALS_DIRECTORY=", marker}
	t.Cleanup(func() { killMarked(marker) })

	_, errs, code := runCLI(t, env, sealedToken+"\n", "accounts", "add", "daytona", "--label", "x",
		"--config", "api_url=http://127.0.0.1:9", "--data-dir", t.TempDir())
	if code == 0 || !strings.Contains(errs, "no D-Bus session bus") || !strings.Contains(errs, "with-keyring.sh") {
		t.Fatalf("accounts add without a session bus: exit %d, want a refusal naming the missing bus:\n%s", code, errs)
	}
	waitNoneMarked(t, marker, 5*time.Second)

	p := start(t, options{dataDir: t.TempDir(), env: env, args: []string{"--docker-scope", "unused"}})
	waitLog(t, p, "which does not answer", 30*time.Second)
	if !strings.Contains(p.stderr.String(), "no D-Bus session bus") {
		t.Fatalf("desktop's keyring warning does not say why:\n%s", p.stderr.String())
	}
	p.stop()
	waitNoneMarked(t, marker, 5*time.Second)
}

// TestDesktopSaysWhetherTheKeyringAnswers: the start-up log says the
// secrets are kept in the OS keyring only once it answered.
func TestDesktopSaysWhetherTheKeyringAnswers(t *testing.T) {
	testsupport.NeedKeyring(t, &secrets.Keyring{Namespace: "e2e-keyring-check"})
	p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
	waitLog(t, p, "secrets are kept in the OS keyring (it answered)", 30*time.Second)
	p.stop()

	p = start(t, options{dataDir: t.TempDir(), env: noKeyring, args: []string{"--docker-scope", "unused"}})
	waitLog(t, p, "which does not answer", 30*time.Second)
	if strings.Contains(p.stderr.String(), "secrets are kept in the OS keyring") {
		t.Fatalf("desktop claims a keyring that does not answer:\n%s", p.stderr.String())
	}
	p.stop()
}
