#!/usr/bin/env bash
# AIPerf (NVIDIA's LLM benchmark tool, PyPI `aiperf`) for the side-by-side
# benchmark against netdiv (tests/src/bin/aiperf-bench.rs):
#   aiperf     the `aiperf` command, in a virtual environment of its own
#              (about 1.2 GB; 2 minutes to install);
#   tokenizer  a local tokenizer directory for the tiny Llama model of
#              deploy/llm/llama-cpp.sh, written with the `tokenizers`
#              package by tests/data/llm/make_tiny_tokenizer.py (AIPerf
#              always loads a tokenizer, and no model hub is reachable).
# Prints the path of each. Both are cached under
# ${NETDIV_AIPERF_CACHE:-~/.cache/netdiv/aiperf} and made once;
# concurrent callers wait on a lock.
#
# Usage: bash deploy/llm/aiperf.sh [aiperf] [tokenizer]   (none: both)
set -euo pipefail

VERSION="${NETDIV_AIPERF_VERSION:-0.13.0}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${NETDIV_AIPERF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netdiv/aiperf}"
python="${PYTHON:-python3}"
mkdir -p "$cache"

say() { echo "aiperf.sh: $*" >&2; }

exec 9>"$cache/.lock"
flock 9

venv="$cache/venv-$VERSION"

install_aiperf() {
  if [[ ! -x "$venv/bin/aiperf" ]] || ! "$venv/bin/python" -c "import tokenizers" 2>/dev/null; then
    say "installing aiperf $VERSION and tokenizers from PyPI (about 2 minutes)"
    rm -rf "$venv"
    "$python" -m venv "$venv" >&2
    "$venv/bin/python" -m pip install --quiet "aiperf==$VERSION" tokenizers >&2 \
      || { say "cannot install aiperf $VERSION from PyPI"; rm -rf "$venv"; return 1; }
  fi
  echo "$venv/bin/aiperf"
}

make_tokenizer() {
  local script="$repo/tests/data/llm/make_tiny_tokenizer.py"
  local hash
  hash="$(sha256sum "$script" | cut -c1-12)"
  local dest="$cache/tokenizers/tiny-llama-$hash"
  if [[ ! -f "$dest/tokenizer.json" ]]; then
    install_aiperf >/dev/null
    rm -rf "$dest.part"
    mkdir -p "$dest.part"
    "$venv/bin/python" "$script" "$dest.part" >&2
    rm -rf "$dest"
    mv "$dest.part" "$dest"
  fi
  echo "$dest"
}

[[ $# -eq 0 ]] && set -- aiperf tokenizer
for what in "$@"; do
  case "$what" in
    aiperf) install_aiperf ;;
    tokenizer) make_tokenizer ;;
    *) say "unknown item '$what' (aiperf, tokenizer)"; exit 2 ;;
  esac
done
