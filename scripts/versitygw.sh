#!/usr/bin/env bash
# Installs versitygw (an S3 server over a local directory, used by the
# exportstore tests and benchmarks) into <repo>/.cache/bin once, and prints
# the binary's path on stdout. Skips the build when the binary is there.
# The first build takes a few minutes.
set -euo pipefail

version=v1.8.0
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/.cache/bin/versitygw"
stamp="$root/.cache/bin/versitygw.version"

if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$root/.cache/bin"
echo "versitygw: building github.com/versity/versitygw/cmd/versitygw@$version into $root/.cache/bin" >&2
GOBIN="$root/.cache/bin" GOFLAGS=-mod=mod go install "github.com/versity/versitygw/cmd/versitygw@$version" >&2
echo "$version" >"$stamp"
echo "$bin"
