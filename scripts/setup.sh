#!/usr/bin/env bash
# Checks (and where it can, installs) what building and testing companion
# needs: Go, a Docker Engine, a Secret Service for the OS keyring, wabt,
# and (with --test) headless Chromium for the browser tests and Node.js 20+
# for the JavaScript client's tests.
# Debian/Ubuntu packages are installed when running as root or with sudo.
set -euo pipefail

echo "setup: checking for dbus, gnome-keyring, wabt, Go and a Docker Engine" >&2
need_pkgs=()
command -v dbus-daemon >/dev/null || need_pkgs+=(dbus)
command -v gnome-keyring-daemon >/dev/null || need_pkgs+=(gnome-keyring)
command -v wat2wasm >/dev/null || need_pkgs+=(wabt)
# Browser tests drive headless Chromium; only the test target needs it.
if [ "${1:-}" = "--test" ]; then
	command -v chromium >/dev/null || command -v chromium-browser >/dev/null || need_pkgs+=(chromium)
	# The hostile-module tests run companion under a memory limit (prlimit)
	# and read its peak RSS (GNU time).
	command -v prlimit >/dev/null || need_pkgs+=(util-linux)
	[ -x /usr/bin/time ] || need_pkgs+=(time)
	# The agent-server emulator's git-delta tests compare with real git.
	command -v git >/dev/null || need_pkgs+=(git)
	# The store tests run on a throwaway PostgreSQL cluster (initdb and
	# pg_ctl of Debian's server package) unless COMPANION_TEST_DATABASE
	# names a server.
	if [ -z "${COMPANION_TEST_DATABASE:-}" ]; then
		compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need_pkgs+=(postgresql)
	fi
	# The no-session-bus test needs dbus-launch, which godbus would
	# autolaunch, to show that companion does not.
	command -v dbus-launch >/dev/null || need_pkgs+=(dbus-x11)
	# The JavaScript client's tests run under `node --test` (Node 20+).
	command -v node >/dev/null || need_pkgs+=(nodejs)
	# The replica tests put two serve replicas behind Debian's Caddy.
	command -v caddy >/dev/null || need_pkgs+=(caddy)
fi

if [ ${#need_pkgs[@]} -gt 0 ]; then
	if command -v apt-get >/dev/null; then
		sudo=""
		[ "$(id -u)" = 0 ] || sudo="sudo"
		echo "setup: installing ${need_pkgs[*]}" >&2
		export DEBIAN_FRONTEND=noninteractive
		$sudo apt-get install -y --no-install-recommends "${need_pkgs[@]}" >/dev/null ||
			{ $sudo apt-get update -q >/dev/null && $sudo apt-get install -y --no-install-recommends "${need_pkgs[@]}" >/dev/null; }
	else
		echo "setup: please install: ${need_pkgs[*]}" >&2
		exit 1
	fi
fi

if [ "${1:-}" = "--test" ]; then
	node_major=$(node --version 2>/dev/null | sed -n 's/^v\([0-9]*\)\..*/\1/p')
	if [ -z "$node_major" ] || [ "$node_major" -lt 20 ]; then
		echo "setup: the JavaScript client's tests need Node.js 20 or later; found $(node --version 2>/dev/null || echo none)." >&2
		echo "setup: install a newer nodejs (Debian 12's is 18: use a newer release's package or https://nodejs.org)" >&2
		exit 1
	fi
fi

command -v go >/dev/null || { echo "setup: Go 1.26 is required (https://go.dev/dl)" >&2; exit 1; }
if ! docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
	echo "setup: a running Docker Engine is required (docker version cannot reach it)" >&2
	exit 1
fi
