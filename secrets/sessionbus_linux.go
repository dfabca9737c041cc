//go:build linux

package secrets

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/canvasapp/companion/core"
)

// noSessionBus says why the Secret Service cannot be reached when there is
// no D-Bus session bus to reach it on, and nil when there is one (or may
// be). Without a bus address the D-Bus library autolaunches one
// (dbus-launch), whose daemon, and the keyring daemon it activates, outlive
// companion: a bus companion did not start and cannot stop. So companion
// never lets it autolaunch; it looks where the library would (the
// environment, then /run/user/UID) and otherwise says what to do.
func noSessionBus() error {
	if addr := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); addr != "" && addr != "autolaunch:" {
		return nil
	}
	run := filepath.Join("/run/user", strconv.Itoa(os.Getuid()))
	for _, name := range []string{"bus", "dbus-session"} {
		if _, err := os.Stat(filepath.Join(run, name)); err == nil {
			return nil
		}
	}
	return &core.Error{
		Kind: core.KindUnavailable,
		Message: "the OS keyring cannot be reached: there is no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set), and companion does not start one " +
			"(it would outlive companion); run companion in your desktop session, under scripts/with-keyring.sh (as make run does), " +
			"or keep tokens in the sealed store (--secrets sealed --secret-key-file FILE; see companion secrets --help)",
	}
}
