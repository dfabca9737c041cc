#!/usr/bin/env bash
# Builds the first-party Wasm provider modules the way a third party builds
# theirs: each providers/wasm/modules/<name> is compiled for wasip1/wasm as
# a reactor (-buildmode=c-shared) and packed with its manifest.json by
# wasmpack (the SDK module's packer, which needs nothing of the server),
# into providers/wasm/modules/dist/<name>.wasm, which the binary
# embeds (providers/wasm/modules/embed.go).
#
#   scripts/build-modules.sh [-f]
#
# Runs at the start of every `make build` and `make test`, so it does
# nothing when every output is newer than every input and was built by the
# same Go toolchain. -f rebuilds anyway.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

GO="${GO:-go}"
modules=(daytona e2b digitalocean runtimeapi cloudflare)
src=providers/wasm/modules
sdk=providers/wasm/sdk
dist="$src/dist"
force=0
if [ "${1:-}" = "-f" ]; then force=1; shift; fi
if [ $# -gt 0 ]; then
	echo "usage: scripts/build-modules.sh [-f]" >&2
	exit 2
fi

fail() { echo "build-modules: $*" >&2; exit 1; }

command -v "$GO" >/dev/null || fail "'$GO' not found on PATH; install Go (see go.mod for the version)"
goversion="$("$GO" env GOVERSION)" || fail "'$GO env GOVERSION' failed"

# Everything a module's bytes depend on: its own code and manifest, the
# shared helpers, the SDK module (guest SDK, manifest validation, packer,
# its go.mod), the main go.mod/go.sum that the modules build with, and
# this script. Directories are listed too: a removed file shows only in
# its directory's mtime.
inputs() {
	local m=$1
	printf '%s\n' scripts/build-modules.sh go.mod go.sum
	find "$src/$m" "$src/internal" "$sdk" \
		\( -type d -o -type f \( -name '*.go' -o -name '*.json' -o -name go.mod -o -name go.sum \) ! -name '*_test.go' \)
}

stale() {
	local m=$1 out="$dist/$m.wasm"
	[ $force = 1 ] && return 0
	[ -f "$out" ] || return 0
	[ "$(cat "$dist/.go-version" 2>/dev/null)" = "$goversion" ] || return 0
	local files old_ifs=$IFS
	IFS=$'\n' # one path a line (bash 3.2 on macOS has no mapfile)
	files=($(inputs "$m"))
	IFS=$old_ifs
	[ -n "$(find "${files[@]}" -newer "$out" -print -quit)" ]
}

todo=()
for m in "${modules[@]}"; do
	[ -f "$src/$m/manifest.json" ] || fail "$src/$m/manifest.json is missing"
	if stale "$m"; then todo+=("$m"); fi
done
[ ${#todo[@]} -eq 0 ] && exit 0

echo "build-modules: compiling ${todo[*]} for wasip1/wasm (about 20 s each on a first build; later builds skip modules that did not change)" >&2
mkdir -p "$dist"
# Build next to the outputs so the final rename is atomic: a concurrent
# build or test never reads a half-written module.
tmp="$(mktemp -d "$root/$dist/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

(cd "$sdk" && "$GO" build -trimpath -o "$tmp/wasmpack" ./cmd/wasmpack) ||
	fail "building the packer ($sdk/cmd/wasmpack) failed"

for m in "${todo[@]}"; do
	echo "build-modules: $m..." >&2
	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 "$GO" build -buildmode=c-shared -trimpath \
		-o "$tmp/$m.raw.wasm" "./$src/$m" ||
		fail "compiling $src/$m for wasip1/wasm failed (see the errors above)"
	"$tmp/wasmpack" -manifest "$src/$m/manifest.json" -o "$tmp/$m.wasm" "$tmp/$m.raw.wasm" ||
		fail "packing $src/$m with its manifest.json failed (see the error above)"
	mv -f "$tmp/$m.wasm" "$dist/$m.wasm"
done
echo "$goversion" >"$tmp/go-version"
mv -f "$tmp/go-version" "$dist/.go-version"
