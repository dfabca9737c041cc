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

for tool in dbus-run-session gnome-keyring-daemon; do
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
	trap 'rm -rf "$keyring_home"' EXIT
else
	keyring_home=${COMPANION_KEYRING_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/companion-keyring}
	mkdir -p "$keyring_home"
	chmod 700 "$keyring_home"
fi
export XDG_DATA_HOME=$keyring_home

# The inner script unlocks a keyring (the password only guards this
# session's own keyring directory) and then runs the command.
dbus-run-session -- bash -c '
	printf "companion-private-keyring" | gnome-keyring-daemon --unlock --components=secrets >/dev/null 2>&1
	"$@"' with-keyring "$@" 2> >(grep -v "Failed to set fd limit" >&2)
