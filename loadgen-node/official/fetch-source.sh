#!/usr/bin/env bash
# Fetches the official MLPerf LoadGen source (the PyPI sdist of
# mlcommons-loadgen at a version pinned in ./releases), verifies its sha256,
# unpacks it into a cache outside the repository and, every time, checks
# that the unpacked files are still the sdist's. Nothing official is ever
# committed.
#
# Usage: fetch-source.sh [ROUND|VERSION]   (default: the last line of
#        ./releases, the current round; e.g. v5.1 or 5.1.2)
# stdout: the absolute path of the unpacked source (last line). Progress: stderr.
# Env: NETDIV_OFFICIAL_CACHE overrides the cache root.
# Used by `cargo build -p loadgen-node --features official` and by the tests.
set -euo pipefail

log() { echo "fetch-source: $*" >&2; }
die() { echo "fetch-source: error: $*" >&2; exit 1; }

releases="$(dirname "${BASH_SOURCE[0]}")/releases"
[[ -f $releases ]] || die "missing $releases"
wanted=${1:-}
row=$(grep -v '^#' "$releases" | awk -v w="$wanted" 'NF >= 3 && (w == "" || $1 == w || $2 == w) { r = $1 " " $2 " " $3 } END { print r }')
[[ -n $row ]] || die "no official LoadGen release for '$wanted' in $releases (rounds: $(grep -v '^#' "$releases" | awk 'NF >= 3 { printf "%s ", $1 }'))"
read -r ROUND VERSION SDIST_SHA256 <<<"$row"
readonly ROUND VERSION SDIST_SHA256
log "round $ROUND: mlcommons-loadgen $VERSION"

for tool in python3 tar sha256sum flock; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is required but not on PATH"
done

cache_root=${NETDIV_OFFICIAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netdiv/official-loadgen}
cache="$cache_root/$VERSION"
mkdir -p "$cache" || die "cannot create cache directory $cache"
cache=$(cd "$cache" && pwd)

# One fetcher at a time; others wait here and then find the finished source.
exec 8>"$cache/.fetch-lock" || die "cannot open lock file $cache/.fetch-lock"
flock 8 || die "cannot lock $cache/.fetch-lock"

tmp=$(mktemp -d "$cache/.tmp.XXXXXX") || die "cannot create a temp directory in $cache"
trap 'rm -rf "$tmp"' EXIT

# 1. The sdist, verified before anything reads it.
sdist="$cache/mlcommons_loadgen-$VERSION.tar.gz"
if [[ ! -f $sdist ]]; then
  log "downloading mlcommons-loadgen==$VERSION (sdist) from PyPI"
  python3 -m pip download --no-binary :all: --no-deps \
    "mlcommons-loadgen==$VERSION" -d "$tmp/dl" >&2 \
    || die "pip download of mlcommons-loadgen==$VERSION failed"
  shopt -s nullglob
  found=("$tmp"/dl/mlcommons[_-]loadgen-"$VERSION".tar.gz)
  shopt -u nullglob
  [[ ${#found[@]} -eq 1 ]] || die "pip did not produce mlcommons_loadgen-$VERSION.tar.gz in $tmp/dl"
  actual=$(sha256sum "${found[0]}" | cut -d' ' -f1)
  if [[ $actual != "$SDIST_SHA256" ]]; then
    die "sha256 mismatch for ${found[0]##*/}: expected $SDIST_SHA256, got $actual (refusing to build)"
  fi
  mv -f "${found[0]}" "$sdist"
else
  actual=$(sha256sum "$sdist" | cut -d' ' -f1)
  [[ $actual == "$SDIST_SHA256" ]] \
    || die "cached $sdist has sha256 $actual, expected $SDIST_SHA256; delete it to re-download"
fi

# 2. Unpacked sources.
src="$cache/src"
if [[ ! -f $src/loadgen.h ]]; then
  log "unpacking $sdist"
  mkdir "$tmp/unpack"
  tar --no-same-owner -xzf "$sdist" -C "$tmp/unpack" || die "cannot unpack $sdist"
  [[ -f $tmp/unpack/mlcommons_loadgen-$VERSION/loadgen.h ]] \
    || die "unexpected sdist layout: no mlcommons_loadgen-$VERSION/loadgen.h"
  rm -rf "$src"
  mv "$tmp/unpack/mlcommons_loadgen-$VERSION" "$src"
fi

# 3. Unaltered: every file of the sdist is byte for byte the same in the
# unpacked sources, each time they are handed out (the build reads them
# there, so an edit in the cache would be compiled otherwise). Files the
# build adds are not in the archive and are not compared; owners, modes
# and times are not contents, and the archive's top folder, stripped, has
# no name of its own to compare.
differences=$(tar --diff -zf "$sdist" -C "$src" --strip-components=1 2>&1 \
  | grep -v -e 'Mod time differs' -e 'Mode differs' -e 'Uid differs' -e 'Gid differs' \
    -e '^tar: : Warning: Cannot stat' || true)
if [[ -n $differences ]]; then
  die "the unpacked sources in $src are not the pinned sdist's (delete $src to unpack it again):
$(echo "$differences" | head -n 10)"
fi

echo "$src"
