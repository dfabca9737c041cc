#!/usr/bin/env bash
# Moves a fresh build into place unless the old binary is running.
#
#   scripts/replace-bin.sh NEW TARGET
#
# `make build` writes NEW next to TARGET. An identical NEW is dropped. When
# a process is running TARGET (a companion started by another `make run`),
# TARGET is left alone and NEW stays beside it: swapping the file under a
# running instance would leave it on a deleted binary, and a restart would
# run code nobody asked for. Otherwise NEW replaces TARGET (a rename: a
# process that starts meanwhile sees one or the other, whole).
set -euo pipefail

new=$1 target=$2
if [ -f "$target" ] && cmp -s "$new" "$target"; then
	rm -f "$new"
	exit 0
fi
running=""
if [ -f "$target" ] && [ -d /proc/self ]; then
	want=$(readlink -f "$target")
	for exe in /proc/[0-9]*/exe; do
		have=$(readlink "$exe" 2>/dev/null) || continue
		if [ "$have" = "$want" ]; then
			pid=${exe#/proc/}
			running="$running ${pid%/exe}"
		fi
	done
fi
if [ -n "$running" ]; then
	echo "make: $target is running (pid${running}); not replacing it. The new build is $new: stop companion and run make again to use it" >&2
	exit 0
fi
mv -f "$new" "$target"
