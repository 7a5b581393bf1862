#!/usr/bin/env bash
# Fetches the official MLPerf LoadGen sdist from PyPI, checks its sha256,
# builds it (no cmake) and links driver.cc against it. Everything lives in a
# cache outside the repository; nothing official is ever written into it.
#
# stdout: the absolute path of the driver binary (last line). Progress: stderr.
# Usage: fetch-build.sh [ROUND|VERSION]   (default: the current round; the
#        releases are pinned in loadgen-node/official/releases)
# Env: NETDIV_OFFICIAL_CACHE overrides the cache root.
set -euo pipefail

readonly LIB_SOURCES=(
  early_stopping.cc issue_query_controller.cc loadgen.cc logging.cc
  test_settings_internal.cc utils.cc results.cc version.cc
  bindings/c_api.cc generated/version_generated.cc
)

log() { echo "fetch-build: $*" >&2; }
die() { echo "fetch-build: error: $*" >&2; exit 1; }

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
releases="$script_dir/../../loadgen-node/official/releases"
wanted=${1:-}
VERSION=$(grep -v '^#' "$releases" | awk -v w="$wanted" 'NF >= 3 && (w == "" || $1 == w || $2 == w) { r = $2 } END { print r }')
[[ -n $VERSION ]] || die "no official LoadGen release for '$wanted' in $releases"
readonly VERSION
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

# 1-2. The verified, unpacked source (shared with the cargo feature).
src=$(bash "$script_dir/../../loadgen-node/official/fetch-source.sh" "$VERSION") \
  || die "fetching the official LoadGen source failed"

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
