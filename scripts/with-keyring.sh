#!/usr/bin/env bash
# Runs a command where the OS keyring (Secret Service over D-Bus) works.
#
#   scripts/with-keyring.sh [--private] CMD ARGS...
#
# If the current session already has a reachable Secret Service and
# --private is not given, CMD runs as is. Otherwise CMD runs inside a fresh
# private D-Bus session with gnome-keyring-daemon unlocked (how headless
# Linux machines and CI get a real keyring). macOS and Windows need nothing.
set -euo pipefail

private=0
if [ "${1:-}" = "--private" ]; then private=1; shift; fi

if [ "$(uname -s)" != "Linux" ]; then exec "$@"; fi

has_secret_service() {
	[ -n "${DBUS_SESSION_BUS_ADDRESS:-}" ] || return 1
	command -v dbus-send >/dev/null || return 1
	dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
		org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null | grep -q 'boolean true'
}

if [ $private = 0 ] && has_secret_service; then exec "$@"; fi

for tool in dbus-daemon gnome-keyring-daemon; do
	if ! command -v "$tool" >/dev/null; then
		echo "with-keyring: $tool is missing; install it with: sudo apt-get install -y dbus gnome-keyring" >&2
		exit 1
	fi
done

# gnome-keyring keeps its files under $XDG_DATA_HOME/keyrings and cannot
# unlock one made with another password, so the session gets a directory of
# its own: a throwaway one for --private (tests), a persistent one kept
# apart from any desktop login keyring otherwise (make run on a headless
# machine), so tokens survive a restart there.
if [ $private = 1 ]; then
	keyring_home=$(mktemp -d)
else
	keyring_home=${COMPANION_KEYRING_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/companion-keyring}
	mkdir -p "$keyring_home"
	chmod 700 "$keyring_home"
fi
export XDG_DATA_HOME=$keyring_home

# A private D-Bus session of our own (rather than dbus-run-session) so that
# only the bus daemon's noise ("Failed to set fd limit") is dropped while
# CMD's stdout and stderr pass through untouched and unbuffered, and so that
# SIGINT/SIGTERM sent to this script reach CMD, whose exit code is ours.
bus_dir=$(mktemp -d)
# alive: pid is a process that has not ended (a zombie has).
alive() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[ "${stat%% *}" != Z ]
}
# The session ends with this script: the keyring daemon and the bus are
# stopped, and waited for (5 s at most each), so that nothing of it is
# left running once the script has exited.
cleanup() {
	local pid
	for pid in ${keyring_pid:-} ${bus_pid:-}; do
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 50); do
			alive "$pid" || break
			sleep 0.1
		done
	done
	rm -rf "$bus_dir"
	[ $private = 1 ] && rm -rf "$keyring_home"
	return 0
}
trap cleanup EXIT
# A signal while the session starts still ends it (through the EXIT trap).
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'exit 129' HUP
if ! dbus-daemon --session --fork --nopidfile --address="unix:path=$bus_dir/bus" \
	--print-pid=3 3>"$bus_dir/pid" 2>"$bus_dir/dbus.log"; then
	echo "with-keyring: could not start a D-Bus session:" >&2
	cat "$bus_dir/dbus.log" >&2
	exit 1
fi
bus_pid=$(cat "$bus_dir/pid")
export DBUS_SESSION_BUS_ADDRESS="unix:path=$bus_dir/bus"
# The password only guards this session's own keyring directory.
printf "companion-private-keyring" |
	gnome-keyring-daemon --unlock --components=secrets >/dev/null 2>&1
# It claims its bus name a moment later; wait (5 s at most) so CMD's first
# keyring call does not race it. Its pid (it forks away from this script)
# comes from the bus, so that cleanup can stop it rather than trust it to
# notice the bus going away.
for _ in $(seq 50); do
	has_secret_service && break
	sleep 0.1
done
keyring_pid=$(dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
	org.freedesktop.DBus.GetConnectionUnixProcessID string:org.freedesktop.secrets 2>/dev/null |
	sed -n 's/^ *uint32 \([0-9]*\).*/\1/p') || keyring_pid=""

# CMD runs as a child (not exec'd, so the bus is cleaned up after it) with
# this script's stdin; a signal to this script is passed on to it.
"$@" <&0 &
child=$!
forward() { kill -"$1" "$child" 2>/dev/null || true; }
trap 'forward TERM' TERM
trap 'forward INT' INT
trap 'forward HUP' HUP
status=0
while :; do
	wait "$child" && status=0 || status=$?
	# wait returns early (>128) when a trapped signal arrives; the child
	# is still running then, so wait again for its real exit.
	kill -0 "$child" 2>/dev/null || break
done
exit "$status"
