#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# debian-fetch.sh CACHE PACKAGE...
# Downloads Debian packages with `apt-get download` (never installs them) into CACHE/debs and
# unpacks each with `dpkg-deb -x` into CACHE/root. A metapackage (linux-image-cloud-amd64,
# linux-headers-cloud-amd64) is resolved to the versioned package it depends on; the
# versioned names are printed, one per line, on stdout. Downloads are cached: a package
# whose .deb is already in CACHE/debs is neither downloaded nor unpacked again.
# Exit status 3 (with a message on stderr) when a package cannot be fetched: callers turn
# that into a skip, not a crash.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 CACHE PACKAGE..." >&2; exit 2; }
cache=$1; shift
mkdir -p "$cache/debs" "$cache/root"
cache=$(cd "$cache" && pwd)

resolve() {  # a metapackage whose only job is to depend on the versioned package
  local p=$1 dep
  case $p in
    linux-image-cloud-amd64|linux-image-amd64|linux-headers-cloud-amd64|linux-headers-amd64)
      dep=$(apt-cache depends "$p" 2>/dev/null | awk '/Depends: linux-(image|headers)-[0-9]/ {print $2; exit}')
      [ -n "$dep" ] || { echo "debian-fetch: cannot resolve $p (apt-get update done?)" >&2; exit 3; }
      echo "$dep" ;;
    *) echo "$p" ;;
  esac
}

for p in "$@"; do
  real=$(resolve "$p")
  if ! ls "$cache/debs/${real}_"*.deb >/dev/null 2>&1; then
    (cd "$cache/debs" && apt-get download "$real" >/dev/null 2>"$cache/debs/$real.err") || {
      echo "debian-fetch: apt-get download $real failed: $(tail -1 "$cache/debs/$real.err")" >&2; exit 3; }
    rm -f "$cache/debs/$real.err"
    dpkg-deb -x "$cache/debs/${real}_"*.deb "$cache/root"
  fi
  echo "$real"
done
