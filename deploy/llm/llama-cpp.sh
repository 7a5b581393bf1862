#!/usr/bin/env bash
# A real LLM serving engine for the openai backend's tests and benchmarks:
#   server  llama.cpp's `llama-server`, built with cmake from the llama.cpp
#           sources vendored in the `llama-cpp-python` sdist on PyPI (CPU,
#           this machine's instruction set). cmake comes from Debian's
#           package (installed here when missing and run as root).
#   model   a tiny Llama-architecture GGUF with random weights, written by
#           tests/data/llm/make_tiny_llama.py with the `gguf` PyPI package
#           (in a virtual environment of its own).
# Prints the path of each. Both are cached under
# ${NETDIV_LLAMA_CACHE:-~/.cache/netdiv/llama.cpp} and made once (about
# 6 minutes for the server on 2 cores); concurrent callers wait on a lock.
#
# Usage: bash deploy/llm/llama-cpp.sh [server] [model]   (none: both)
set -euo pipefail

VERSION="${NETDIV_LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${NETDIV_LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netdiv/llama.cpp}"
python="${PYTHON:-python3}"
mkdir -p "$cache"

say() { echo "llama-cpp.sh: $*" >&2; }

# Runs the rest of the script under an exclusive lock on the cache.
exec 9>"$cache/.lock"
flock 9

# Downloads the sdist of llama-cpp-python==$VERSION (checked against the
# sha256 PyPI lists) and prints its path.
fetch_sdist() {
  local dest="$cache/llama_cpp_python-$VERSION.tar.gz"
  if [[ ! -f "$dest" ]]; then
    say "downloading llama-cpp-python $VERSION (sdist) from PyPI"
    "$python" - "$VERSION" "$dest" <<'PY' >&2 || { say "cannot download llama-cpp-python $VERSION"; return 1; }
import hashlib, json, sys, urllib.parse, urllib.request
version, dest = sys.argv[1:]
index = "https://pypi.org/pypi/llama-cpp-python/json"
with urllib.request.urlopen(index, timeout=60) as r:
    files = json.load(r)["releases"].get(version, [])
sdist = next((f for f in files if f["packagetype"] == "sdist"), None)
if sdist is None:
    sys.exit(f"PyPI lists no sdist for llama-cpp-python {version}")
url = urllib.parse.urljoin(index, sdist["url"])
with urllib.request.urlopen(url, timeout=600) as r:
    data = r.read()
digest = hashlib.sha256(data).hexdigest()
if digest != sdist["digests"]["sha256"]:
    sys.exit(f"{url}: sha256 {digest}, PyPI says {sdist['digests']['sha256']}")
with open(dest + ".part", "wb") as f:
    f.write(data)
import os
os.rename(dest + ".part", dest)
PY
  fi
  echo "$dest"
}

build_server() {
  # Built for this CPU (GGML_NATIVE): the cache key names its instruction
  # set, so a cache carried to another machine builds again.
  local cpu
  cpu="$(uname -m)-$(grep -m1 -E '^(flags|Features)' /proc/cpuinfo | sha256sum | cut -c1-8)"
  local dest="$cache/$VERSION-$cpu/llama-server"
  if [[ -x "$dest" ]]; then
    echo "$dest"
    return
  fi
  if ! command -v cmake >/dev/null 2>&1; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
      say "installing cmake from Debian's packages"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q cmake >&2 \
        || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q cmake >&2; }
    else
      say "cmake is missing: install Debian's cmake package (apt-get install cmake)"
      return 1
    fi
  fi
  local sdist work
  sdist="$(fetch_sdist)"
  work="$cache/build-$VERSION"
  rm -rf "$work"
  mkdir -p "$work"
  tar -xzf "$sdist" -C "$work" --strip-components=1
  local src="$work/vendor/llama.cpp"
  [[ -f "$src/CMakeLists.txt" ]] || { say "$sdist holds no vendor/llama.cpp"; return 1; }
  say "building llama-server from $(basename "$sdist") (a few minutes)"
  cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF >"$work/configure.log" 2>&1 \
    || { tail -30 "$work/configure.log" >&2; return 1; }
  cmake --build "$work/build" --target llama-server -j "$(nproc)" >"$work/build.log" 2>&1 \
    || { tail -30 "$work/build.log" >&2; return 1; }
  mkdir -p "$(dirname "$dest")"
  cp "$work/build/bin/llama-server" "$dest.part"
  mv "$dest.part" "$dest"
  rm -rf "$work"
  echo "$dest"
}

make_model() {
  local script="$repo/tests/data/llm/make_tiny_llama.py"
  local hash
  hash="$(sha256sum "$script" | cut -c1-12)"
  local dest="$cache/models/tiny-llama-$hash.gguf"
  if [[ ! -f "$dest" ]]; then
    local venv="$cache/venv"
    if ! "$venv/bin/python" -c "import gguf, numpy" 2>/dev/null; then
      say "making a Python environment with gguf and numpy"
      rm -rf "$venv"
      "$python" -m venv "$venv" >&2
      "$venv/bin/python" -m pip install --quiet gguf numpy >&2 \
        || { say "cannot install gguf and numpy from PyPI"; return 1; }
    fi
    mkdir -p "$(dirname "$dest")"
    "$venv/bin/python" "$script" "$dest.part.gguf" >&2
    mv "$dest.part.gguf" "$dest"
  fi
  echo "$dest"
}

[[ $# -eq 0 ]] && set -- server model
for what in "$@"; do
  case "$what" in
    server) build_server ;;
    model) make_model ;;
    *) say "unknown item '$what' (server, model)"; exit 2 ;;
  esac
done
