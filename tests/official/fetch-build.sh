#!/usr/bin/env bash
# Fetches the official MLPerf LoadGen sdist from PyPI, checks its sha256,
# builds it (no cmake) and links driver.cc against it. Everything lives in a
# cache outside the repository; nothing official is ever written into it.
#
# stdout: the absolute path of the driver binary (last line). Progress: stderr.
# Env: NETDIV_OFFICIAL_CACHE overrides the cache root.
set -euo pipefail

readonly VERSION=6.0.17
readonly SDIST_SHA256=a2e85d09e3cc0c606f89bfe1fbf97537c8b5b238ae0afbd923ad9c710fcf2ca8
readonly LIB_SOURCES=(
  early_stopping.cc issue_query_controller.cc loadgen.cc logging.cc
  test_settings_internal.cc utils.cc results.cc version.cc
  bindings/c_api.cc generated/version_generated.cc
)

log() { echo "fetch-build: $*" >&2; }
die() { echo "fetch-build: error: $*" >&2; exit 1; }

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
driver_src="$script_dir/driver.cc"
cache_root=${NETDIV_OFFICIAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netdiv/official-loadgen}
cache="$cache_root/$VERSION"
driver_bin="$cache/official-driver"

for tool in python3 g++ ar tar sha256sum flock; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is required but not on PATH"
done
[[ -f $driver_src ]] || die "driver source not found: $driver_src"

mkdir -p "$cache" || die "cannot create cache directory $cache"
cache=$(cd "$cache" && pwd)
driver_bin="$cache/official-driver"

# One builder at a time; others wait here and then find the finished build.
exec 9>"$cache/.lock" || die "cannot open lock file $cache/.lock"
flock 9 || die "cannot lock $cache/.lock"

if [[ -x $driver_bin && $driver_bin -nt $driver_src ]]; then
  log "cached: $driver_bin"
  echo "$driver_bin"
  exit 0
fi

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

# 3. The static library, objects kept in the cache.
lib_dir="$cache/lib"
if [[ ! -f $lib_dir/libmlperf_loadgen.a ]]; then
  jobs=$(nproc 2>/dev/null || echo 1)
  log "compiling the official LoadGen ($jobs parallel jobs)"
  mkdir "$tmp/lib"
  pids=()
  objects=()
  i=0
  for source in "${LIB_SOURCES[@]}"; do
    object="$tmp/lib/$(basename "${source%.cc}").o"
    objects+=("$object")
    (cd "$src" && g++ -std=c++14 -O3 -I. -c "$source" -o "$object") &
    pids+=($!)
    i=$((i + 1))
    if ((i % jobs == 0)); then
      for pid in "${pids[@]}"; do wait "$pid" || die "compiling the official LoadGen failed"; done
      pids=()
    fi
  done
  for pid in "${pids[@]}"; do wait "$pid" || die "compiling the official LoadGen failed"; done
  ar rcs "$tmp/lib/libmlperf_loadgen.a" "${objects[@]}" || die "ar failed"
  rm -rf "$lib_dir"
  mv "$tmp/lib" "$lib_dir"
fi

# 4. Our driver, linked against it; renamed into place only when complete.
log "compiling $driver_src"
g++ -O3 -std=c++17 -pthread -I"$src" "$driver_src" "$lib_dir/libmlperf_loadgen.a" \
  -o "$tmp/official-driver" || die "compiling or linking driver.cc failed"
mv -f "$tmp/official-driver" "$driver_bin"

log "built: $driver_bin"
echo "$driver_bin"
